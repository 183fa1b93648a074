"""The tutor-evaluation pipeline for one run: persona, conversation, judge, reports.

Stages follow spec 001 (loading_persona, running_session, evaluating, generating_reports,
complete | failed). Every message is stored as it arrives, so a failed run keeps its transcript,
and the reason lands in the run's error and in error.txt.
"""

import asyncio
import logging
import os
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import close_old_connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from evaluation.conf import setting
from evaluation.models import DimensionScore, EvaluationRun, Problem, RunMessage
from evaluation.models.runs import RunStage, RunStatus
from evaluation.providers import Meter, ProviderSpec, get_llm
from evaluation.providers.base import InvalidJSONError
from evaluation.selectors import group_runs, run_messages, run_report_context, run_status
from evaluation.tutoring import judge, reports
from evaluation.tutoring.personas import persona_as_dict
from evaluation.tutoring.runner import ChatTarget, ProtocolTarget, RunLog, TutorUnavailable, tutor_server
from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.topics import topic_as_dict

log = logging.getLogger(__name__)
Listener = Callable[[dict[str, Any]], None]


def run_folder(run: EvaluationRun) -> Path:
    return Path(setting("RUNS_DIR")) / run.run_id


def run_group_name(run: EvaluationRun) -> str:
    return f"run_{run.pk.hex}"


def broadcast(run: EvaluationRun, listener: Listener | None = None) -> None:
    """Tell live views about a run's progress, after the transaction commits."""
    payload = run_status(run)
    if listener:
        listener(payload)
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        # An in-memory layer reaches only this process, and runs execute in workers, never in the
        # web process: live views poll instead. A shared layer (Redis) carries the events.
        return

    def send() -> None:
        try:
            async_to_sync(layer.group_send)(run_group_name(run), {"type": "run.progress", "payload": payload})
            async_to_sync(layer.group_send)("runs", {"type": "run.progress", "payload": payload})
        except Exception:  # a broadcast must never break a run
            log.warning("broadcast failed for %s", run.run_id, exc_info=True)

    transaction.on_commit(send)


def progress(run: EvaluationRun, listener: Listener | None = None, **fields: Any) -> None:
    for key, value in fields.items():
        setattr(run, key, value)
    run.save(update_fields=list(fields))
    broadcast(run, listener)


def _meter(run: EvaluationRun) -> Meter:
    def save(meter: Meter) -> None:
        EvaluationRun.objects.filter(pk=run.pk).update(token_usage=meter.as_dict(), cost_usd=meter.cost_usd)

    stored = EvaluationRun.objects.values("token_usage", "cost_usd").get(pk=run.pk)
    return Meter(limit_usd=run.cost_limit_usd, on_change=save).restore(stored["token_usage"] or {}, stored["cost_usd"])


def _override(run: EvaluationRun) -> str | None:
    return run.config.get("provider") or None


def fail(run: EvaluationRun, exc: BaseException, listener: Listener | None = None) -> None:
    text = "".join(traceback.format_exception(exc))
    message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, TutorUnavailable | InvalidJSONError) else str(exc)
    folder = run_folder(run)
    reports.write_error(folder, timezone.now().isoformat(), message, text)
    if isinstance(exc, InvalidJSONError):
        (folder / "judge_raw.txt").write_text("\n\n----- repair -----\n\n".join(exc.raw), encoding="utf-8")
    try:
        reports.write_run_reports(folder, run_report_context(run))
    except Exception:
        log.warning("partial reports failed for %s", run.run_id, exc_info=True)
    progress(
        run,
        listener,
        status=RunStatus.FAILED,
        stage=RunStage.FAILED,
        error=message,
        error_traceback=text,
        completed_at=timezone.now(),
        detail=f"failed at {run.stage}",
    )
    RunLog(folder / "run.log")(f"FAILED: {message}")


@contextmanager
def tutor_target(agent: Any, server_url: str | None, meter: Meter) -> Iterator[Any]:
    """The agent under test as a target: an OpenAI-compatible chat endpoint, or a server speaking the
    session protocol (the reference tutor by default, started here if none is running)."""
    if agent is not None and agent.kind == "openai_chat":
        spec = ProviderSpec("openai", agent.model, agent.base_url, {"api": "chat"})
        yield ChatTarget(get_llm("tutor", override=spec, meter=meter), agent.system_prompt)
        return
    base = agent.base_url if agent is not None and agent.kind == "protocol" else server_url or setting("SERVER_URL")
    auth = os.environ.get(agent.auth_header, "") if agent is not None and agent.auth_header else ""
    with tutor_server(base, manage=agent is None or agent.kind == "reference") as url:
        yield ProtocolTarget(url, auth)


def converse(run: EvaluationRun, *, server_url: str | None, listener: Listener | None) -> None:
    """Simulate the conversation, storing every message as it arrives."""
    persona = persona_as_dict(run.persona) if run.persona else None
    topic = topic_as_dict(run.topic) if run.topic else None
    if persona is None or topic is None:
        raise ValueError("a simulated run needs a persona and a topic")
    folder = run_folder(run)
    runlog = RunLog(folder / "run.log")
    meter = _meter(run)
    simulator = StudentSimulator(
        persona, topic, get_llm("simulator", override=_override(run), meter=meter), seed=run.seed or 0
    )
    turn_timeout = float(run.config.get("turn_timeout", 90))

    async def on_message(message: dict[str, Any]) -> None:
        def store() -> None:
            RunMessage.objects.create(
                run=run,
                turn=message["turn"],
                role=message["role"],
                content=message["content"],
                timestamp=parse_datetime(message["timestamp"]) or timezone.now(),
                metadata=message["metadata"],
            )
            if message["role"] == "student":
                turn = message["metadata"]["turn_decision"]["turn"]
                progress(run, listener, turn=turn, detail=f"Turn {turn}/{run.max_turns}")
            close_old_connections()

        await asyncio.to_thread(store)

    agent = run.agent
    runlog(
        f"run {run.run_id}: persona {persona['persona_id']}, topic {topic['topic_id']}, max_turns {run.max_turns}, seed {run.seed}"
    )
    with tutor_target(agent, server_url, meter) as target:
        result = asyncio.run(
            target.converse(
                simulator,
                topic["topic_id"],
                max_turns=run.max_turns,
                turn_timeout=turn_timeout,
                on_message=on_message,
                log=runlog,
            )
        )
    run.config = {
        **run.config,
        "session_id": result.session_id,
        "ended_by": result.ended_by,
        "turn_decisions": [d.as_dict() for d in simulator.turn_decisions],
    }
    run.save(update_fields=["config"])


def evaluate(run: EvaluationRun, listener: Listener | None = None) -> None:
    """Judge the stored conversation and store scores and problems (replacing any earlier ones)."""
    progress(run, listener, stage=RunStage.EVALUATING, detail="Judging the conversation")
    messages = run_messages(run)
    if not messages:
        raise ValueError("nothing to evaluate: the run has no messages")
    persona = persona_as_dict(run.persona) if run.persona else None
    topic = topic_as_dict(run.topic) if run.topic else run.config.get("topic")
    llm = get_llm("judge", override=_override(run), meter=_meter(run))
    verdict = judge.judge_conversation(messages, persona, topic, llm)
    with transaction.atomic():
        DimensionScore.objects.filter(run=run).delete()
        Problem.objects.filter(run=run).delete()
        DimensionScore.objects.bulk_create(
            DimensionScore(run=run, dimension=d, score=s, analysis=verdict.analysis.get(d, ""))
            for d, s in verdict.scores.items()
        )
        Problem.objects.bulk_create(
            Problem(
                run=run,
                rank=p["rank"],
                title=p["title"][:300],
                turns=p["turns"],
                description=p["description"],
                quote=p["quote"],
                quote_found=p["quote_found"],
                severity=p["severity"],
                root_cause=p["root_cause"],
            )
            for p in verdict.problems
        )
        run.overall_score = verdict.average
        run.summary = verdict.summary
        run.judge_label = verdict.judge_label
        run.save(update_fields=["overall_score", "summary", "judge_label"])


def finish(run: EvaluationRun, listener: Listener | None = None) -> None:
    progress(run, listener, stage=RunStage.GENERATING_REPORTS, detail="Writing reports")
    folder = run_folder(run)
    reports.write_run_reports(folder, run_report_context(run))
    (folder / "error.txt").unlink(missing_ok=True)
    progress(
        run,
        listener,
        status=RunStatus.COMPLETED,
        stage=RunStage.COMPLETE,
        detail="Complete",
        error="",
        error_traceback="",
        completed_at=timezone.now(),
        artifacts_dir=str(folder),
    )
    if run.group:
        finalize_group_safely(run.group)


def finalize_group_safely(group: str) -> None:
    try:
        finalize_group(group)
    except Exception:  # the comparison is a by-product: it must not fail the run that triggered it
        log.warning("comparison for %s failed", group, exc_info=True)


def finalize_group(group: str) -> Path | None:
    """Write the comparison once every run of the group has finished; idempotent."""
    if EvaluationRun.objects.filter(group=group, status__in=[RunStatus.PENDING, RunStatus.RUNNING]).exists():
        return None
    runs = group_runs(group)
    if len(runs) < 2:
        return None
    folder = Path(setting("RUNS_DIR")) / group
    reports.write_comparison(folder, group, runs)
    return folder


def execute_run(run_pk: Any, *, server_url: str | None = None, listener: Listener | None = None) -> EvaluationRun:
    """Run the whole pipeline for one run; never raises for the run's own failures."""
    run = EvaluationRun.objects.select_related("persona", "topic", "agent").get(pk=run_pk)
    try:
        progress(
            run,
            listener,
            status=RunStatus.RUNNING,
            stage=RunStage.LOADING_PERSONA,
            started_at=timezone.now(),
            detail="Loading persona",
        )
        run_folder(run).mkdir(parents=True, exist_ok=True)
        if run.source == "simulated":
            progress(run, listener, stage=RunStage.RUNNING_SESSION, detail=f"Turn 0/{run.max_turns}")
            converse(run, server_url=server_url, listener=listener)
        evaluate(run, listener)
        finish(run, listener)
    except Exception as exc:
        fail(run, exc, listener)
        if run.group:
            finalize_group_safely(run.group)
    return run


def retry_evaluation(run_pk: Any, *, listener: Listener | None = None) -> EvaluationRun:
    """Re-judge a stored conversation without simulating it again."""
    run = EvaluationRun.objects.select_related("persona", "topic", "agent").get(pk=run_pk)
    try:
        progress(run, listener, status=RunStatus.RUNNING, error="", completed_at=None)
        evaluate(run, listener)
        finish(run, listener)
    except Exception as exc:
        fail(run, exc, listener)
    return run
