"""The roles an LLM plays; the providers and the admin's LLM configs both read this one list."""

from django.db import models


class LLMRole(models.TextChoices):
    SIMULATOR = "simulator"
    TUTOR = "tutor"
    JUDGE = "judge"
    PROPOSITION_JUDGE = "proposition_judge"
    GATE = "gate"
    SUITE_AGENT = "suite_agent"
    SUITE_JUDGE = "suite_judge"
    RUBRIC_JUDGE = "rubric_judge"
