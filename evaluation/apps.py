"""The evaluation app."""

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation"
    default_auto_field = "django.db.models.BigAutoField"
