"""The evaluation app."""

import sys

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django_q.signals import post_spawn

        from evaluation import checks  # noqa: F401  (registers the system checks)
        from evaluation.models import prepared
        from evaluation.tasks import sweep_on_worker_start

        # A prepared statement a migration made stale is forgotten and run again (docs/scaling.md).
        connection_created.connect(prepared.install, dispatch_uid="evaluation-forget-stale-plans")

        # Every qcluster worker process that starts ends the runs of workers that died.
        post_spawn.connect(sweep_on_worker_start, dispatch_uid="evaluation-sweep-on-worker-start")
        if sys.argv[1:2] == ["qcluster"]:
            from evaluation.tasks import preload

            preload()  # before the cluster forks its workers, so they share it
