"""The evaluation app."""

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Each room registers its offline (rule-based) handlers with the offline provider.
        from evaluation.drift import offline as _drift_offline  # noqa: F401
        from evaluation.suites import offline as _suites_offline  # noqa: F401
        from evaluation.tutoring import offline as _tutoring_offline  # noqa: F401
