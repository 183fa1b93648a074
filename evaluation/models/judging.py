"""Judge validity: rubrics as data, imported conversations and their items, human labels, judge scores."""

from django.conf import settings
from django.db import models

from evaluation.models.catalog import Topic


class RubricUnit(models.TextChoices):
    SESSION = "session", "Whole conversation"
    RESPONSE = "response", "One response in context"


class ScaleKind(models.TextChoices):
    INTEGER = "integer", "Integer range"
    CATEGORIES = "categories", "Ordered categories"


class Rubric(models.Model):
    """A judging rubric: dimensions, their scales and anchors, the unit judged and the judge's prompt."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    version = models.PositiveIntegerField(
        default=1,
        help_text="The current version, part of every judge configuration key. A change of scales, questions or "
        "anchors after labels or judgements exist makes a new version by itself; raise it by hand when the "
        "rubric's meaning changed in a way its text does not show.",
    )
    unit = models.CharField(max_length=10, choices=RubricUnit.choices, default=RubricUnit.SESSION)
    description = models.TextField(blank=True)
    judge_prompt = models.TextField(
        help_text="The judge's instructions. {dimensions} is replaced by each dimension's question, scale and anchors."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return f"{self.slug} v{self.version}"


class RubricVersion(models.Model):
    """A rubric as it was: its unit and dimensions (scales, questions, anchors) at one version number.

    Labels and judgements are read against the version they were made under. A version nothing was
    labelled or judged under yet may still change in place; after that it is never changed again.
    """

    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    unit = models.CharField(max_length=10, choices=RubricUnit.choices)
    dimensions = models.JSONField(
        default=list,
        help_text="Each dimension as it was: id, name, position, question, scale_kind, scale_min, scale_max, "
        "categories, aliases, anchors.",
    )
    content_hash = models.CharField(max_length=64, help_text="Hash of the unit and the dimensions.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["rubric", "-number"]
        constraints = [models.UniqueConstraint(fields=["rubric", "number"], name="rubric_version_once")]

    def __str__(self) -> str:
        return f"{self.rubric.slug} v{self.number}"


class RubricDimension(models.Model):
    """One scored dimension: an integer range or ordered categories (listed best first), with anchors."""

    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="dimensions")
    name = models.CharField(max_length=64)
    position = models.PositiveSmallIntegerField(default=0)
    question = models.TextField(blank=True)
    scale_kind = models.CharField(max_length=12, choices=ScaleKind.choices, default=ScaleKind.INTEGER)
    scale_min = models.IntegerField(null=True, blank=True, help_text="Integer scales: the lowest score.")
    scale_max = models.IntegerField(null=True, blank=True, help_text="Integer scales: the highest score.")
    categories = models.JSONField(
        default=list, blank=True, help_text='Category scales, best first: ["Yes", "To some extent", "No"].'
    )
    aliases = models.JSONField(
        default=dict, blank=True, help_text='Other spellings of a category: {"To some extent": "Somewhat"}.'
    )
    anchors = models.JSONField(
        default=dict, blank=True, help_text='What each level means: {"Yes": "...", "No": "..."} or {"1-2": "..."}.'
    )

    class Meta:
        ordering = ["rubric", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["rubric", "name"], name="rubric_dimension_once")]

    def __str__(self) -> str:
        return f"{self.rubric.slug}.{self.name}"


class Transcript(models.Model):
    """A conversation brought in from outside (not simulated here); real, so judged without persona claims."""

    source = models.CharField(max_length=100, help_text="Where it came from: a dataset, a product, a file.")
    external_id = models.CharField(max_length=200, help_text="Its id at the source; unique per source.")
    messages = models.JSONField(default=list, help_text='[{"role": "tutor"|"student"|..., "content": "..."}]')
    metadata = models.JSONField(default=dict, blank=True)
    topic = models.ForeignKey(Topic, null=True, blank=True, on_delete=models.SET_NULL, related_name="transcripts")
    content_hash = models.CharField(max_length=64, help_text="Hash of messages and items: re-imports detect change.")
    imported_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["source", "external_id"]
        constraints = [models.UniqueConstraint(fields=["source", "external_id"], name="transcript_once_per_source")]

    def __str__(self) -> str:
        return f"{self.source}:{self.external_id}"


class Item(models.Model):
    """What a judge scores and people label: a whole conversation (key ""), or one candidate response in its context."""

    transcript = models.ForeignKey(Transcript, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(
        max_length=100, blank=True, help_text="The candidate's name (e.g. a tutor model); '' = session."
    )
    response = models.TextField(blank=True, help_text="The candidate next turn, for response-level rubrics.")

    class Meta:
        ordering = ["transcript", "key"]
        constraints = [models.UniqueConstraint(fields=["transcript", "key"], name="item_once_per_transcript")]

    def __str__(self) -> str:
        return f"{self.transcript}/{self.key}" if self.key else str(self.transcript)


class Annotation(models.Model):
    """One person's label of one item on one dimension; several annotators per item are allowed."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    # RESTRICT: a dimension with labels cannot be deleted on its own (its labels would go with it), but
    # deleting the whole rubric still takes them, through its versions.
    dimension = models.ForeignKey(RubricDimension, on_delete=models.RESTRICT, related_name="annotations")
    rubric_version = models.ForeignKey(
        RubricVersion,
        on_delete=models.CASCADE,
        related_name="annotations",
        help_text="The version of the rubric the label was made under; its scale reads the value.",
    )
    value = models.CharField(max_length=100, help_text="As on the scale: a category, or an integer.")
    score = models.FloatField(help_text="The value's place on the scale (higher is better).")
    annotator = models.CharField(max_length=150)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["item", "dimension", "annotator"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "dimension", "annotator", "rubric_version"], name="annotation_once_per_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.annotator}: {self.dimension.name}={self.value}"


class JudgeConfiguration(models.Model):
    """Who judged and how: provider/model, the prompt's hash and the rubric's version, as one key."""

    key = models.CharField(max_length=300, unique=True)
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="judge_configurations")
    provider = models.CharField(max_length=200, help_text="provider/model")
    prompt_hash = models.CharField(max_length=64)
    rubric_version = models.PositiveIntegerField(help_text="The RubricVersion number its scores were made under.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rubric", "-created_at"]

    def __str__(self) -> str:
        return self.key


class JudgeScore(models.Model):
    """The judge's value for one item and dimension, in one repeat."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="judge_scores")
    # RESTRICT, as for labels: the rubric's deletion takes scores through its judge configurations.
    dimension = models.ForeignKey(RubricDimension, on_delete=models.RESTRICT, related_name="judge_scores")
    configuration = models.ForeignKey(JudgeConfiguration, on_delete=models.CASCADE, related_name="scores")
    repeat = models.PositiveSmallIntegerField(default=1)
    value = models.CharField(max_length=100)
    score = models.FloatField()
    rationale = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["configuration", "item", "dimension", "repeat"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "dimension", "configuration", "repeat"], name="judge_score_once_per_repeat"
            )
        ]

    def __str__(self) -> str:
        return f"{self.configuration.provider} r{self.repeat}: {self.dimension.name}={self.value}"


class CanarySet(models.Model):
    """Labelled items staff keep as a judge's canary: every new judge configuration re-judges them first."""

    name = models.CharField(max_length=100, unique=True)
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="canaries")
    items = models.ManyToManyField(Item, related_name="canaries", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
