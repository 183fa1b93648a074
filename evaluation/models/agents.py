"""Agents under test, their evaluation settings and the channel messages character agents write."""

import uuid

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Agent(models.Model):
    """An agent under test, and how to reach it."""

    class Kind(models.TextChoices):
        REFERENCE = "reference", "Built-in reference tutor"
        PROTOCOL = "protocol", "Server speaking the session protocol"
        OPENAI_CHAT = "openai_chat", "OpenAI-compatible chat endpoint"
        CHARACTER = "character", "Character agent (persona drift)"

    id = models.SlugField(max_length=64, primary_key=True)
    display_name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.REFERENCE)
    base_url = models.URLField(blank=True, help_text="Protocol server or OpenAI-compatible base URL.")
    auth_header = models.CharField(
        max_length=100, blank=True, help_text="Name of an environment variable holding the Authorization value."
    )
    model = models.CharField(max_length=200, blank=True)
    system_prompt = models.TextField(blank=True)
    persona_spec = models.TextField(blank=True, help_text="Character agents: who this agent is.")
    active = models.BooleanField(default=True)
    extra = models.JSONField(
        default=dict, blank=True, help_text='Character agents: {"nudge": "..."} and other keys from the cast file.'
    )
    loaded_fingerprint = models.CharField(
        max_length=64, blank=True, editable=False, help_text="Hash of the record as its catalogue file left it."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=["reference", "protocol", "openai_chat", "character"]),
                name="agent_kind_valid",
            )
        ]

    def __str__(self) -> str:
        return self.display_name


class AgentEvaluationConfig(models.Model):
    """Per-agent runtime corrections (spec 002's agent_evaluation_config); all off by default."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="evaluation_config")
    action_gate_enabled = models.BooleanField(default=False)
    action_gate_threshold = models.FloatField(default=5.0, validators=[MinValueValidator(0), MaxValueValidator(9)])
    anti_convergence_enabled = models.BooleanField(default=False)
    convergence_threshold = models.FloatField(default=0.6, validators=[MinValueValidator(0), MaxValueValidator(1)])
    repetition_suppression_enabled = models.BooleanField(default=False)
    repetition_threshold = models.FloatField(default=0.3, validators=[MinValueValidator(0), MaxValueValidator(1)])
    max_correction_attempts = models.PositiveSmallIntegerField(default=2)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "agent evaluation config"

    def __str__(self) -> str:
        return f"Corrections for {self.agent_id}"


class AgentMessage(models.Model):
    """A message a character agent wrote in a channel (the input of drift scoring)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="messages")
    channel = models.CharField(max_length=100)
    recipient = models.CharField(max_length=100, blank=True)
    text = models.TextField()
    created_at = models.DateTimeField()
    source = models.CharField(max_length=20, default="ingested")

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["agent", "created_at"]), models.Index(fields=["channel", "created_at"])]

    def __str__(self) -> str:
        return f"{self.agent_id} in #{self.channel}: {self.text[:40]}"
