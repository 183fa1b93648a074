"""Which provider and model serve each LLM role."""

from django.db import models

from evaluation.roles import LLMRole

__all__ = ["EndpointCredential", "LLMConfig", "LLMRole"]


class LLMConfig(models.Model):
    """The provider and model for one role; wins over environment variables, loses to a CLI flag."""

    role = models.CharField(max_length=30, choices=LLMRole.choices, unique=True)
    provider = models.CharField(max_length=30, help_text="A vendor name: the admin offers the providers' registry.")
    model = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(blank=True, help_text="OpenAI-compatible server (Ollama, vLLM, ...) or a proxy.")
    options = models.JSONField(
        default=dict, blank=True, help_text='e.g. {"reasoning_effort": "high", "thinking_budget": 20000}'
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["role"]
        verbose_name = "LLM config"

    def __str__(self) -> str:
        return f"{self.role}: {self.provider}/{self.model or 'default'}"


class EndpointCredential(models.Model):
    """The API key for one custom base URL (an OpenAI-compatible server, a proxy); the admin never shows it back.

    A vendor's key from the environment goes only to that vendor's own endpoint: a base URL typed by
    staff gets this credential, a variable named in EVAL_ALLOWED_KEY_VARS, or no key at all.
    """

    base_url = models.URLField(unique=True, help_text="Exactly as runs name it after '@' (e.g. http://host:11434/v1).")
    api_key = models.CharField(max_length=500, help_text="Write-only: stored for this URL, never displayed.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["base_url"]
        verbose_name = "endpoint credential"

    def __str__(self) -> str:
        return self.base_url
