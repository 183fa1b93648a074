"""Persona-drift data (spec 002): propositions, their scores and correction logs (golden baselines are
JSON files in baselines/, accepted from a drift run in the admin or by drift_baseline)."""

import uuid

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from evaluation.models.agents import Agent
from evaluation.models.runs import EvaluationRun


class DriftRun(models.Model):
    """What a drift run scores: its agent's message window and dimensions (spec 002's evaluation_runs)."""

    run = models.OneToOneField(EvaluationRun, on_delete=models.CASCADE, primary_key=True, related_name="drift")
    dimensions = models.JSONField(default=list, blank=True)
    sample_size = models.PositiveIntegerField(default=20, help_text="Newest messages asked for.")
    source = models.CharField(max_length=50, blank=True, help_text="Only messages of this source (e.g. 'cast').")
    batch_size = models.PositiveIntegerField(default=20, help_text="Proposition checks per judge call.")
    is_baseline = models.BooleanField(default=False, help_text="Recorded by drift_baseline.")
    messages_judged = models.PositiveIntegerField(default=0)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    judged_by = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per dimension, who judged: provider/model, or in mock-judge mode replay or offline.",
    )

    class Meta:
        verbose_name = "drift run"

    def __str__(self) -> str:
        return f"drift {self.run_id}"


class PropositionSet(models.Model):
    """One proposition file: a dimension, an agent (or '_default') and any further file-level keys."""

    dimension = models.CharField(max_length=50, help_text="A drift dimension (the scorers' registry names them).")
    agent_key = models.CharField(max_length=64, help_text="An agent id, or '_default' for every agent.")
    extra = models.JSONField(default=dict, blank=True)
    source_file = models.CharField(max_length=255, blank=True)
    loaded_fingerprint = models.CharField(
        max_length=64, blank=True, editable=False, help_text="Hash of the record as its catalogue file left it."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["dimension", "agent_key"]
        constraints = [
            models.UniqueConstraint(fields=["dimension", "agent_key"], name="proposition_set_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.dimension}/{self.agent_key}"


class Proposition(models.Model):
    """A claim about an agent's behaviour, scored 0-9 by a judge."""

    proposition_set = models.ForeignKey(PropositionSet, on_delete=models.CASCADE, related_name="propositions")
    proposition_id = models.CharField(max_length=120)
    claim = models.TextField()
    weight = models.FloatField(default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    inverted = models.BooleanField(default=False, help_text="Anti-pattern: a high score is bad.")
    position = models.PositiveIntegerField(default=0)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["proposition_set", "position"]
        constraints = [
            models.UniqueConstraint(fields=["proposition_set", "proposition_id"], name="proposition_unique_in_set"),
            models.CheckConstraint(
                condition=models.Q(weight__gte=0) & models.Q(weight__lte=1), name="proposition_weight_0_1"
            ),
        ]

    def __str__(self) -> str:
        return self.proposition_id


class PropositionScore(models.Model):
    """Spec 002's evaluation_scores: one proposition's score within a run."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    evaluation_run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="proposition_scores")
    dimension = models.CharField(max_length=50, help_text="A drift dimension (the scorers' registry names them).")
    proposition_id = models.CharField(max_length=120)
    score = models.FloatField(null=True, blank=True, help_text="0-9; empty when the judge never scored it.")
    reasoning = models.TextField()
    context_snippet = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["evaluation_run", "dimension"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(score__isnull=True) | (models.Q(score__gte=0) & models.Q(score__lte=9)),
                name="proposition_score_0_9",
            )
        ]

    def __str__(self) -> str:
        return f"{self.proposition_id}: {self.score}"


class CorrectionLog(models.Model):
    """A runtime correction applied to an agent's message (spec 002's correction_logs)."""

    class Outcome(models.TextChoices):
        CORRECTED = "corrected"
        PASSED_AFTER_RETRY = "passed_after_retry"
        FORCED_THROUGH = "forced_through"
        FAILED_OPEN = "failed_open", "failed open (the gate's judge did not answer in time)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="correction_logs")
    run = models.ForeignKey(EvaluationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="corrections")
    original_text = models.TextField()
    corrected_text = models.TextField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True, help_text="Empty when the judge gave none (failed open).")
    threshold = models.FloatField()
    reasoning = models.TextField()
    attempt_number = models.PositiveIntegerField()
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    token_usage = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["agent", "created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=["corrected", "passed_after_retry", "forced_through", "failed_open"]),
                name="correction_outcome_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.outcome}"
