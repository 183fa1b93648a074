"""Labelling queues: items handed to assigned people one at a time, their labels' timings, and adjudications."""

from django.conf import settings
from django.db import models

from evaluation.models.judging import Item, JudgeConfiguration, Rubric, RubricDimension, RubricVersion


class QueueOrigin(models.TextChoices):
    LABEL_NEXT = "label-next", "Label next (stratified picks to narrow the corrected interval)"
    FILTER = "filter", "A filter over transcripts or runs"
    RANDOM = "random", "A random sample"
    JOB = "job", "The items a judge configuration scored"
    ITEMS = "items", "Items named one by one"


class LabelQueue(models.Model):
    """A rubric's items to label, the people assigned, how many independent labels each item needs, and
    whether labelling is blind (judge scores and other people's labels hidden until one's own are in)."""

    name = models.CharField(max_length=200)
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="queues")
    rubric_version = models.ForeignKey(
        RubricVersion,
        on_delete=models.CASCADE,
        related_name="queues",
        help_text="The version labels are made under (the rubric's current version when the queue was made).",
    )
    configuration = models.ForeignKey(
        JudgeConfiguration,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="queues",
        help_text="The judge configuration whose corrected estimates the queue tracks (its scores are hidden "
        "while labelling blind).",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_queues"
    )
    annotators = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="label_queues", blank=True)
    adjudicators = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        related_name="adjudicated_queues",
        blank=True,
        help_text="People who settle disagreements (the owner always may); never on an item they labelled.",
    )
    labels_per_item = models.PositiveSmallIntegerField(default=2, help_text="Independent labels each item needs.")
    blind = models.BooleanField(default=True)
    claim_seconds = models.PositiveIntegerField(
        default=600, help_text="How long an item handed to someone stays theirs before it may go to another."
    )
    origin = models.CharField(max_length=12, choices=QueueOrigin.choices, default=QueueOrigin.ITEMS)
    origin_detail = models.CharField(max_length=300, blank=True, help_text="What the items were chosen by.")
    start_widths = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per dimension, the corrected interval's width of its leading estimand when the queue was made.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class QueueItem(models.Model):
    """One item of a queue, with the claim that hands it to one person at a time."""

    queue = models.ForeignKey(LabelQueue, on_delete=models.CASCADE, related_name="entries")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="queue_entries")
    position = models.PositiveIntegerField(default=0)
    done = models.PositiveSmallIntegerField(default=0, help_text="People who submitted their labels.")
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claim_expires = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["queue", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["queue", "item"], name="queue_item_once")]
        indexes = [models.Index(fields=["queue", "done", "position"], name="queue_item_next")]

    def __str__(self) -> str:
        return f"{self.queue} #{self.position}"


class QueueLabel(models.Model):
    """One person's turn at one queue item: when it was shown, when submitted (or skipped), the seconds it took
    and their comment. The labels themselves are Annotations, the ones every figure reads."""

    entry = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="turns")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    shown_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True, help_text="From first shown to submitted.")
    skipped = models.BooleanField(default=False)
    comment = models.TextField(blank=True)

    class Meta:
        ordering = ["entry", "user"]
        constraints = [models.UniqueConstraint(fields=["entry", "user"], name="queue_label_once")]

    def __str__(self) -> str:
        return f"{self.user} on {self.entry}"


class Adjudication(models.Model):
    """The final label a third person (or a queue's owner) set where people disagreed: stored apart from the
    raw labels, which stay. Figures that use it say so."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="adjudications")
    dimension = models.ForeignKey(RubricDimension, on_delete=models.RESTRICT, related_name="adjudications")
    rubric_version = models.ForeignKey(RubricVersion, on_delete=models.CASCADE, related_name="adjudications")
    value = models.CharField(max_length=100)
    score = models.FloatField(help_text="The value's place on the scale (higher is better).")
    adjudicator = models.CharField(max_length=150)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    queue = models.ForeignKey(
        LabelQueue, null=True, blank=True, on_delete=models.SET_NULL, related_name="adjudications"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["item", "dimension"]
        constraints = [
            models.UniqueConstraint(fields=["item", "dimension", "rubric_version"], name="adjudication_once")
        ]

    def __str__(self) -> str:
        return f"adjudicated by {self.adjudicator}: {self.dimension.name}={self.value}"
