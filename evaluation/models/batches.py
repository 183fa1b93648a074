"""Provider batches: work sent through a vendor's batch API, stored so a restarted worker resumes polling."""

from django.db import models


class BatchState(models.TextChoices):
    SUBMITTING = "submitting", "submitting"
    """The row exists; the vendor has not yet confirmed the batch (no provider id)."""
    WAITING = "waiting", "waiting on the provider"
    APPLIED = "applied", "results stored"
    FAILED = "failed", "failed"


class ProviderBatch(models.Model):
    """One batch at one vendor: what it serves, how far it is, and how its custom ids map back."""

    vendor = models.CharField(max_length=40, help_text="The provider that serves it (openai, anthropic, offline, ...)")
    model = models.CharField(max_length=200, blank=True)
    base_url = models.CharField(max_length=500, blank=True)
    provider_batch_id = models.CharField(
        max_length=200, blank=True, db_index=True, help_text="The vendor's id for the batch (empty until it is created)"
    )
    kind = models.CharField(max_length=40, help_text="The work it serves: judge_items, drift_scores, run_judge")
    job_key = models.CharField(max_length=64, db_index=True, help_text="Hash of the job: the same job resumes this row")
    job = models.JSONField(default=dict, help_text="What the work is (rubric, repeats, runs, configuration)")
    custom_ids = models.JSONField(default=dict, help_text="{custom id: what its answer maps back to}")
    state = models.CharField(max_length=20, choices=BatchState.choices, default=BatchState.SUBMITTING)
    provider_state = models.CharField(max_length=40, blank=True, help_text="The vendor's own status, as last read")
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0, help_text="Lines the vendor answered")
    failed = models.PositiveIntegerField(default=0, help_text="Lines the vendor failed (retried one by one)")
    retried = models.PositiveIntegerField(default=0, help_text="Lines answered by a direct call instead")
    lost = models.PositiveIntegerField(default=0, help_text="Lines that failed in the batch and again directly")
    polls = models.PositiveIntegerField(default=0)
    usage = models.JSONField(default=dict, blank=True)
    cost_usd = models.FloatField(default=0.0, help_text="Batch lines at the batch price, direct retries at theirs")
    error = models.TextField(blank=True)
    reason = models.TextField(
        blank=True, help_text="Why the vendor failed, expired or cancelled the whole batch, in its own words"
    )
    resends = models.PositiveIntegerField(
        default=0, help_text="Times its unanswered lines were sent again as a new batch after a whole-batch failure"
    )
    carried = models.JSONField(
        default=dict,
        blank=True,
        help_text="Answers from its earlier vendor batches, the lines the current one holds, its chunk size",
    )
    results = models.JSONField(
        default=dict, blank=True, help_text="{custom id: the answer}, kept when each run takes its own answer later"
    )
    run_id = models.CharField(max_length=64, blank=True, help_text="The run it serves, when it serves one")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "provider batches"
        indexes = [models.Index(fields=["kind", "job_key", "state"], name="batch_job_state")]

    def __str__(self) -> str:
        return f"{self.vendor} batch {self.provider_batch_id or '(submitting)'}: {self.kind}, {self.done}/{self.total}"

    @property
    def stage_text(self) -> str:
        """What a run or judging job waiting on it shows: the lines the vendor counts as done (Anthropic counts
        none until the whole batch ends, so its batches say so instead of 0/n), and a failure sent again."""
        if self.vendor.startswith("anthropic") and self.provider_state == "in_progress" and not self.done:
            text = f"waiting on the provider's batch of {self.total} lines (Anthropic counts them when it ends)"
        else:
            text = f"waiting on the provider's batch ({self.done}/{self.total} done)"
        if self.resends:
            text += f"; sent again ({self.resends}x) after: {self.reason.splitlines()[-1] if self.reason else '?'}"
        return text
