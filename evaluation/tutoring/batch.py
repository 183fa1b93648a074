"""Run a batch of tutor-evaluation runs in this process, on N worker threads, sharing one tutor server."""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

from django.db import close_old_connections

from evaluation.conf import setting
from evaluation.models import EvaluationRun
from evaluation.tutoring import pipeline
from evaluation.tutoring.server import tutor_server

RunOne = Callable[[EvaluationRun, str | None], None]
NotStarted = Callable[[EvaluationRun, Exception], None]


def execute_batch(
    runs: list[EvaluationRun],
    one: RunOne,
    *,
    workers: int = 1,
    server_url: str | None = None,
    manage_server: bool = True,
    not_started: NotStarted | None = None,
) -> list[EvaluationRun]:
    """Execute runs (already created) with `one` and return them reloaded; comparisons are written at the end.

    When the batch cannot start (no tutor server to use or start), every run is handed to `not_started`
    with the reason, so none stays queued for good; without it the error propagates.
    """

    def guarded(run: EvaluationRun, url: str | None) -> None:
        try:
            one(run, url)
        finally:
            close_old_connections()

    needs_server = any(r.source == "simulated" and (r.agent is None or r.agent.kind == "reference") for r in runs)
    with ExitStack() as stack:
        url = server_url
        try:
            if needs_server:
                url = stack.enter_context(tutor_server(server_url or setting("SERVER_URL"), manage=manage_server))
        except Exception as exc:
            if not_started is None:
                raise
            for run in runs:
                not_started(run, exc)
        else:
            _map(guarded, runs, url, workers)
    for group in {r.group for r in runs if r.group}:
        # Each run's end writes its group's comparison once the group is done (pipeline.after_run);
        # left here: a group none of whose runs got that far (the batch could not start), or one
        # whose comparison was left half written.
        if not pipeline.comparison_written(group):
            pipeline.finalize_group(group)
    return list(
        EvaluationRun.objects.filter(pk__in=[r.pk for r in runs])
        .select_related("persona")
        .order_by("persona__persona_id", "repeat_index")
    )


def _map(fn: RunOne, runs: list[EvaluationRun], url: str | None, workers: int) -> None:
    if workers <= 1:
        for run in runs:
            fn(run, url)
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval-run")
    try:
        list(pool.map(lambda r: fn(r, url), runs))
    except BaseException:
        # Stopped (Ctrl-C, SIGTERM): runs not begun are dropped at once, instead of waiting for the running
        # ones to end; the caller cancels those, and they stop at their next turn.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
