"""Run a batch of tutor-evaluation runs in this process, on N worker threads, sharing one tutor server."""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections

from evaluation.conf import setting
from evaluation.models import EvaluationRun
from evaluation.tutoring import pipeline
from evaluation.tutoring.runner import tutor_server


def execute_batch(
    runs: list[EvaluationRun],
    *,
    workers: int = 1,
    server_url: str | None = None,
    manage_server: bool = True,
    listener: Callable[[dict[str, Any]], None] | None = None,
) -> list[EvaluationRun]:
    """Execute runs (already created) and return them reloaded; the group comparison is written at the end."""

    def one(run: EvaluationRun, url: str | None) -> None:
        try:
            pipeline.execute_run(run.pk, server_url=url, listener=listener)
        finally:
            close_old_connections()

    needs_server = any(r.source == "simulated" and (r.agent is None or r.agent.kind == "reference") for r in runs)
    if needs_server:
        with tutor_server(server_url or setting("SERVER_URL"), manage=manage_server) as url:
            _map(one, runs, url, workers)
    else:
        _map(one, runs, server_url, workers)
    groups = {r.group for r in runs if r.group}
    for group in groups:
        pipeline.finalize_group(group)
    return list(
        EvaluationRun.objects.filter(pk__in=[r.pk for r in runs])
        .select_related("persona")
        .order_by("persona__persona_id", "repeat_index")
    )


def _map(
    fn: Callable[[EvaluationRun, str | None], None], runs: list[EvaluationRun], url: str | None, workers: int
) -> None:
    if workers <= 1:
        for run in runs:
            fn(run, url)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval-run") as pool:
        list(pool.map(lambda r: fn(r, url), runs))
