"""django-q2 entry point: take a run id and its attempt, call the room's service. Workers are synchronous."""

import logging

from evaluation.drift import services as drift
from evaluation.judging import services as judging
from evaluation.models import EvaluationRun
from evaluation.models.runs import RunKind
from evaluation.runs import services as run_services
from evaluation.suites import services as suites
from evaluation.tutoring import services as tutoring

log = logging.getLogger(__name__)


def run_task(run_pk: str, attempt: int, action: str = "execute") -> str:
    """Run one attempt; a task for a run that is not queued at this attempt does nothing ('skipped')."""
    kind = EvaluationRun.objects.filter(pk=run_pk).values_list("kind", flat=True).first()
    if kind == RunKind.TUTOR:
        run = tutoring.run_execute(run_pk, attempt, action)
    elif kind == RunKind.DRIFT:
        run = drift.drift_run_execute(run_pk, attempt)
    elif kind == RunKind.SUITE:
        run = suites.suite_run_execute(run_pk, attempt)
    else:
        return "missing"
    return run.status if run is not None else "skipped"


def canary_task(rubric: str) -> str:
    """A rubric's judge configuration changed: judge its canary set under the new one (the card shows the shift)."""
    return str(judging.canary_rejudge(rubric=rubric))


def runs_sweep_task() -> list[str]:
    """django-q2 schedule (every minute): runs whose worker stopped beating are marked interrupted,
    tasks a broker lost are sent again, and waiting runs take the slots that are free."""
    ended = run_services.runs_interrupt_stale()
    run_services.runs_resend_lost()
    run_services.runs_dispatch()
    return ended


def sweep_on_worker_start(sender: object = None, proc_name: str = "", **kwargs: object) -> None:
    """A worker process that starts (after a crash, say) first ends the runs whose worker died,
    and imports the LLM vendors' modules, so its first run does not wait for them."""
    from evaluation.providers.registry import preload

    preload()
    ended = run_services.runs_interrupt_stale()
    if ended:
        log.warning("%s: marked interrupted on start: %s", proc_name, ", ".join(ended))
    run_services.runs_dispatch_safely()
