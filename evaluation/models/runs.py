"""Evaluation runs and what they produce: messages, dimension scores and problems."""

import uuid

from django.conf import settings
from django.db import models

from evaluation.models.agents import Agent
from evaluation.models.catalog import Persona, Topic


class RunKind(models.TextChoices):
    TUTOR = "tutor", "Tutor evaluation"
    DRIFT = "drift", "Persona drift"
    SUITE = "suite", "EVAL.md suite"


class RunStatus(models.TextChoices):
    """The one lifecycle every kind of run follows (docs/architecture.md)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"


ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
RETRYABLE_STATUSES = (RunStatus.FAILED, RunStatus.INTERRUPTED)


class RunStage(models.TextChoices):
    """Spec 001's status stages, in the order a run passes through them; the terminal stages use the
    lifecycle's own words, so the API speaks one vocabulary."""

    QUEUED = "queued"
    LOADING_PERSONA = "loading_persona"
    RUNNING_SESSION = "running_session"
    EVALUATING = "evaluating"
    GENERATING_REPORTS = "generating_reports"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"


class RunSource(models.TextChoices):
    """Where a run's conversation comes from: spec 001's two tutor sources, and one per other kind."""

    SIMULATED = "simulated", "Simulated"
    EXISTING_SESSION = "existing_session", "Session"
    DRIFT = "drift", "Agent messages (drift)"
    SUITE = "suite", "EVAL.md suite"


DEFAULT_SOURCE: dict[str, str] = {
    RunKind.TUTOR: RunSource.SIMULATED,
    RunKind.DRIFT: RunSource.DRIFT,
    RunKind.SUITE: RunSource.SUITE,
}
"""A run's source when its creator names none: drift and suite runs never read as simulated tutoring."""


class Severity(models.TextChoices):
    CRITICAL = "critical"
    MAJOR = "major"
    MINOR = "minor"


class RootCause(models.TextChoices):
    MISSED_STUDENT_SIGNAL = "missed_student_signal"
    WRONG_PACING = "wrong_pacing"
    REPETITIVE_APPROACH = "repetitive_approach"
    EMOTIONAL_MISMATCH = "emotional_mismatch"
    MISSED_MISCONCEPTION = "missed_misconception"
    OVER_SCAFFOLDING = "over_scaffolding"
    CONVERSATION_HISTORY_WINDOW = "conversation_history_window"
    SESSION_SUMMARY_LOSSY = "session_summary_lossy"
    PROMPT_QUALITY = "prompt_quality"
    MODEL_CAPABILITY = "model_capability"
    OTHER = "other"


class EvaluationRun(models.Model):
    """One evaluation of any kind; spec 001's run folder and spec 002's evaluation_runs row in one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run_id = models.CharField(max_length=120, unique=True, help_text="Readable id, also the report folder name.")
    kind = models.CharField(max_length=10, choices=RunKind.choices, default=RunKind.TUTOR)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED)
    stage = models.CharField(max_length=20, choices=RunStage.choices, default=RunStage.QUEUED)
    attempt = models.PositiveIntegerField(
        default=1, help_text="Bumped by every retry; a task for another attempt does nothing."
    )
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last progress of the running attempt (or when its task was sent)."
    )
    queue_action = models.CharField(
        max_length=10,
        blank=True,
        default="",
        help_text="What the queued attempt's task does (execute, evaluate); empty: run in the starting process.",
    )
    sent_attempt = models.PositiveIntegerField(
        default=0, help_text="The attempt whose task was handed to the workers; below `attempt`, it waits its turn."
    )
    worker = models.CharField(max_length=120, blank=True, help_text="host:pid of the worker running it.")
    detail = models.CharField(max_length=200, blank=True)
    turn = models.PositiveIntegerField(default=0)
    max_turns = models.PositiveIntegerField(default=20)
    source = models.CharField(max_length=20, choices=RunSource.choices, default=RunSource.SIMULATED)
    source_session_id = models.UUIDField(null=True, blank=True)
    persona = models.ForeignKey(Persona, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    topic = models.ForeignKey(Topic, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="runs")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who started it (the API token's user, or the dashboard's); empty for the CLI.",
    )
    group = models.CharField(max_length=120, blank=True, db_index=True, help_text="Multi-persona comparison id.")
    repeat_index = models.PositiveIntegerField(default=1)
    seed = models.BigIntegerField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True, help_text="Snapshot of everything the run was started with.")
    token_usage = models.JSONField(default=dict, blank=True)
    cost_usd = models.FloatField(default=0.0)
    cost_limit_usd = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_traceback = models.TextField(blank=True)
    artifacts_dir = models.CharField(max_length=500, blank=True)
    overall_score = models.FloatField(null=True, blank=True)
    summary = models.TextField(blank=True)
    judge_label = models.CharField(max_length=200, blank=True, help_text="Who judged: provider/model.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("start_run", "Can start evaluation runs (tutor, drift, suite)"),
            ("retry_run", "Can retry or re-evaluate runs"),
            ("cancel_run", "Can cancel runs"),
            ("use_corrections", "Can call the drift gate and pre-invocation checks (LLM calls)"),
        ]
        indexes = [
            models.Index(fields=["agent", "created_at"]),
            models.Index(fields=["status", "created_at"]),
            models.Index(fields=["kind", "created_at"]),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(kind__in=RunKind.values), name="run_kind_valid"),
            models.CheckConstraint(condition=models.Q(status__in=RunStatus.values), name="run_status_valid"),
            models.CheckConstraint(condition=models.Q(stage__in=RunStage.values), name="run_stage_valid"),
            models.CheckConstraint(condition=models.Q(source__in=RunSource.values), name="run_source_valid"),
        ]

    def __str__(self) -> str:
        return self.run_id

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES


class CompletedRun(EvaluationRun):
    class Meta:
        proxy = True
        verbose_name = "completed run"


class FailedRun(EvaluationRun):
    class Meta:
        proxy = True
        verbose_name = "failed run"


class BaselineGate(models.Model):
    """A batch's check against its baseline (tutoring.regression.Gate), stored with the batch's group once
    its last run has ended, and again when a run of it ends after a retry."""

    class Outcome(models.TextChoices):
        REGRESSION = "regression"
        PASS = "pass"
        INCONCLUSIVE = "inconclusive", "inconclusive (the batch could not see a drop of the threshold's size)"
        NOT_COMPARED = "not compared"

    group = models.CharField(max_length=120, unique=True)
    baseline = models.CharField(max_length=200, help_text="The baseline's group (or run) id.")
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    forced = models.BooleanField(default=False, help_text="Compared although the baseline does not match.")
    detail = models.JSONField(default=dict, help_text="The whole gate: rows, runs left out, mismatches, rule.")
    checked_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-checked_at"]

    def __str__(self) -> str:
        return f"{self.group} against {self.baseline}: {self.outcome}" + (" (forced)" if self.forced else "")


class RunEvent(models.Model):
    """One change of a run's state, and who made it (a user, a worker, the sweeper, the CLI)."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    attempt = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=RunStatus.choices)
    actor = models.CharField(max_length=200, help_text="user:<name>, worker:<host:pid>, sweeper or cli.")
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "at", "id"]

    def __str__(self) -> str:
        return f"{self.run_id} attempt {self.attempt}: {self.status} by {self.actor}"


class RunMessage(models.Model):
    """One message of a run's conversation."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="messages")
    attempt = models.PositiveIntegerField(default=1, help_text="The run attempt that stored it; attempts never mix.")
    turn = models.PositiveIntegerField()
    role = models.CharField(max_length=20)  # tutor | student | system | agent
    content = models.TextField()
    timestamp = models.DateTimeField()
    metadata = models.JSONField(default=dict, blank=True, help_text="The simulator's turn decision, if any.")

    class Meta:
        ordering = ["run", "attempt", "turn", "id"]
        indexes = [models.Index(fields=["run", "attempt", "turn"])]

    def __str__(self) -> str:
        return f"[Turn {self.turn}] {self.role.upper()}: {self.content[:50]}"


class DimensionScore(models.Model):
    """A run's score on one dimension, with the judge's analysis."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="dimension_scores")
    dimension = models.CharField(max_length=50)
    score = models.FloatField()
    analysis = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "dimension"], name="dimension_score_once_per_run"),
            # Tutor dimensions are 1-10, drift dimensions 0-9: the union is 0-10.
            models.CheckConstraint(
                condition=models.Q(score__gte=0) & models.Q(score__lte=10), name="dimension_score_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dimension}: {self.score}"


class Problem(models.Model):
    """One of the judge's top problems in a run."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="problems")
    rank = models.PositiveSmallIntegerField(default=1)
    title = models.CharField(max_length=300)
    turns = models.JSONField(default=list, blank=True)
    description = models.TextField(blank=True)
    quote = models.TextField(blank=True)
    quote_found = models.BooleanField(default=True, help_text="False when the quote does not occur in the transcript.")
    severity = models.CharField(max_length=10, choices=Severity.choices)
    root_cause = models.CharField(max_length=40, choices=RootCause.choices)

    class Meta:
        ordering = ["run", "rank"]
        constraints = [
            models.CheckConstraint(condition=models.Q(severity__in=Severity.values), name="problem_severity_valid"),
            models.CheckConstraint(
                condition=models.Q(root_cause__in=RootCause.values), name="problem_root_cause_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"[{self.severity}] {self.title}"
