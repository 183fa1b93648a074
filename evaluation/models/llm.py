"""Which provider and model serve each LLM role."""

from django.db import models


class LLMRole(models.TextChoices):
    SIMULATOR = "simulator"
    TUTOR = "tutor"
    JUDGE = "judge"
    PROPOSITION_JUDGE = "proposition_judge"
    GATE = "gate"
    SUITE_AGENT = "suite_agent"
    SUITE_JUDGE = "suite_judge"


PROVIDERS = ["openai", "anthropic", "anthropic-haiku", "offline", "replay"]


class LLMConfig(models.Model):
    """The provider and model for one role; wins over environment variables, loses to a CLI flag."""

    role = models.CharField(max_length=30, choices=LLMRole.choices, unique=True)
    provider = models.CharField(max_length=30, choices=[(p, p) for p in PROVIDERS])
    model = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(blank=True, help_text="OpenAI-compatible server (Ollama, vLLM, ...) or a proxy.")
    options = models.JSONField(
        default=dict, blank=True, help_text='e.g. {"reasoning_effort": "high", "thinking_budget": 20000}'
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["role"]
        verbose_name = "LLM config"
        constraints = [
            models.CheckConstraint(condition=models.Q(provider__in=PROVIDERS), name="llmconfig_provider_valid")
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.provider}/{self.model or 'default'}"
