"""Student personas and tutoring topics: the catalogue simulations are built from."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Persona(models.Model):
    """A simulated student, every field of a persona file plus the keys we do not know (extra)."""

    persona_id = models.SlugField(max_length=64, unique=True, help_text="Stable id, e.g. 'ace'.")
    name = models.CharField(max_length=100)
    grade = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(12)])
    age = models.PositiveSmallIntegerField(null=True, blank=True)
    description = models.TextField()
    correct_answer_probability = models.FloatField(
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Enforced per turn: the chance the student answers correctly.",
    )
    personality_traits = models.JSONField(default=list, blank=True)
    common_mistakes = models.JSONField(default=list, blank=True)
    response_style = models.JSONField(default=dict, help_text='Needs "max_words"; may hold language, examples.')
    behavioral_notes = models.JSONField(default=list, blank=True)
    persona_specific_behaviors = models.JSONField(
        default=dict, blank=True, help_text='Probabilities such as {"boredom_probability": 0.3}.'
    )
    grounding = models.JSONField(
        default=dict,
        blank=True,
        help_text='Targets from real students: {"verbosity": 2, "question_rate": 0.05, "acknowledgement_rate": 0.25, '
        '"cooperation": 0.85}; empty: not grounded. manage.py realism --fit proposes them.',
    )
    extra = models.JSONField(default=dict, blank=True, help_text="Keys from the file this tool does not use; kept.")
    source_file = models.CharField(max_length=255, blank=True)
    loaded_fingerprint = models.CharField(
        max_length=64, blank=True, editable=False, help_text="Hash of the record as its catalogue file left it."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["persona_id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(correct_answer_probability__gte=0) & models.Q(correct_answer_probability__lte=1),
                name="persona_probability_0_1",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.persona_id})"


class Topic(models.Model):
    """A topic a tutor teaches, with the context the judge is given."""

    topic_id = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    grade = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(12)])
    subject = models.CharField(max_length=100, default="mathematics")
    description = models.TextField(blank=True)
    learning_objectives = models.JSONField(default=list, blank=True)
    common_misconceptions = models.JSONField(default=list, blank=True)
    approved = models.BooleanField(default=False)
    extra = models.JSONField(default=dict, blank=True)
    source_file = models.CharField(max_length=255, blank=True)
    loaded_fingerprint = models.CharField(
        max_length=64, blank=True, editable=False, help_text="Hash of the record as its catalogue file left it."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["grade", "topic_id"]

    def __str__(self) -> str:
        return f"{self.name} (grade {self.grade})"
