"""django-q2 entry points: take an id, call the service. Workers are synchronous."""

from evaluation.tutoring import pipeline


def run_execute_task(run_pk: str) -> str:
    return pipeline.execute_run(run_pk).status


def run_retry_evaluation_task(run_pk: str) -> str:
    return pipeline.retry_evaluation(run_pk).status


def suite_run_task(run_pk: str) -> str:
    from evaluation.suites.store import suite_run_execute

    return suite_run_execute(run_pk).status


def drift_run_task(run_pk: str) -> str:
    from evaluation.drift.evaluate import drift_run_execute

    return drift_run_execute(run_pk).status
