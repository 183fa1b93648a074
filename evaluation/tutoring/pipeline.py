"""The tutor-evaluation work for one run: persona, conversation, judge, reports.

Stages follow spec 001 (loading_persona, running_session, evaluating, generating_reports,
complete | failed); the run kernel owns the lifecycle around them. Every message is stored as the
turn it belongs to ends, under the run's current attempt, so a failed run keeps its transcript and
a retry never mixes with it; the reason lands in the run's error and in error.txt.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from evaluation.conf import setting
from evaluation.models import (
    BaselineGate,
    BatchState,
    DimensionScore,
    EvaluationRun,
    Persona,
    Problem,
    ProviderBatch,
    RunMessage,
    statements,
)
from evaluation.models.runs import RunSource, RunStage, RunStatus
from evaluation.providers import Meter, ProviderSpec, allowed_env_value, estimate_cost, get_llm
from evaluation.providers import batch as provider_batch
from evaluation.providers.base import InvalidJSONError, LLMResult, ProviderError
from evaluation.providers.batch import BatchCall
from evaluation.providers.registry import tutor_provider_env
from evaluation.runs.outage import retrying
from evaluation.runs.services import RunHandle, RunStopped
from evaluation.tutoring import judge, reports
from evaluation.tutoring.client import ChatTarget, ProtocolTarget, RunLog, SessionResult, TutorUnavailable
from evaluation.tutoring.llm_records import RECORD_KEYS, llm_record, usage_of
from evaluation.tutoring.selectors import (
    Judged,
    group_gate,
    group_realism_of,
    group_runs,
    run_messages,
    run_persona,
    run_report_context,
    run_topic,
)
from evaluation.tutoring.server import tutor_server
from evaluation.tutoring.simulator import StudentSimulator

log = logging.getLogger(__name__)

conversation_loop: Callable[[], asyncio.AbstractEventLoop]
"""The conversation's event loop: uvloop's (in C) takes less of a turn than asyncio's own, which
wakes several times a turn (the socket's frames, the store thread's results)."""
try:
    import uvloop

    conversation_loop = uvloop.new_event_loop
except ImportError:  # pragma: no cover - uvloop is not built for Windows
    conversation_loop = asyncio.new_event_loop


def run_folder(run: EvaluationRun) -> Path:
    return Path(setting("RUNS_DIR")) / run.run_id


def _meter(run: EvaluationRun) -> Meter:
    """The run's meter, from the usage the run holds (the handle's copy is current: every write of
    the usage goes through it or through `save`)."""

    def save(meter: Meter) -> None:
        run.token_usage, run.cost_usd = meter.as_dict(), meter.cost_usd
        statements.update(EvaluationRun, {"pk": run.pk}, token_usage=run.token_usage, cost_usd=run.cost_usd)

    return Meter(limit_usd=run.cost_limit_usd, on_change=save).restore(run.token_usage or {}, run.cost_usd)


def _override(run: EvaluationRun) -> str | None:
    return run.config.get("provider") or None


def with_llm(run: EvaluationRun, role: str, record: dict[str, Any]) -> dict[str, Any]:
    """The run's config with one role's record in it (config["llm"][role]), to save with the stage it starts."""
    return {**run.config, "llm": {**(run.config.get("llm") or {}), role: record}}


def on_failure(handle: RunHandle, exc: BaseException, message: str, text: str) -> None:
    """Write error.txt (and the judge's raw replies) and whatever reports the stored data allows."""
    run = handle.run
    folder = run_folder(run)
    reports.write_error(folder, timezone.now().isoformat(), message, text)
    if isinstance(exc, InvalidJSONError):
        (folder / "judge_raw.txt").write_text("\n\n----- repair -----\n\n".join(exc.raw), encoding="utf-8")
    try:
        reports.write_run_reports(folder, run_report_context(run))
    except Exception:
        log.warning("partial reports failed for %s", run.run_id, exc_info=True)
    failed = RunLog(folder / "run.log")
    failed(f"FAILED: {message}")
    failed.close()


@contextmanager
def tutor_target(agent: Any, server_url: str | None, meter: Meter) -> Iterator[Any]:
    """The agent under test as a target: an OpenAI-compatible chat endpoint, or a server speaking the
    session protocol (the reference tutor at EVAL_SERVER_URL by default)."""
    if agent is not None and agent.kind == "openai_chat":
        spec = ProviderSpec("openai", agent.model, agent.base_url, {"api": "chat"})
        yield ChatTarget(get_llm("tutor", override=spec, meter=meter), agent.system_prompt)
        return
    if agent is not None and agent.kind == "protocol":
        base = agent.base_url
        auth = ""
        if agent.auth_header:
            auth = allowed_env_value(agent.auth_header, destination=f"agent {agent.pk} at {base}")
    else:
        # Our own reference tutor: the install's protocol key creates the session. It goes to no other
        # server; an external agent's credential is the one its auth_header names.
        base = server_url or setting("SERVER_URL")
        auth = f"Bearer {setting('PROTOCOL_KEY')}"
    # Never start a tutor server here: a worker whose configured tutor is down fails the run with the
    # reason instead of starting tutor servers of its own (the CLI starts one for its whole batch).
    faults = (agent.extra or {}).get("faults") if agent is not None and agent.kind == "reference" else None
    with tutor_server(base, manage=False) as url:
        yield ProtocolTarget(url, auth, faults=faults)


def converse(handle: RunHandle, *, server_url: str | None) -> None:
    """Simulate the conversation, storing its messages as they arrive (under the current attempt): a
    student message with the tutor's reply to it, in one commit with the turn's progress, and
    whatever arrived when the conversation ends or fails.

    The stores run in order on one thread of the run's own, which keeps one database connection for
    the whole conversation, while the conversation goes on: the next message is sent without
    waiting for its store. A store's failure (or RunStopped, when the run was cancelled)
    surfaces at the next reply, so the worker notices within one turn. Token usage and cost are
    saved with each turn's progress instead of after every LLM call. The price of one commit a
    turn: live views show a student message (and "Turn N") once the tutor has answered it, and a
    worker killed while the tutor answers loses that message from the run (the tutor's session
    has it; the run ends interrupted).
    """
    run = handle.run
    persona, topic = run_persona(run), run_topic(run)
    if persona is None or topic is None:
        raise ValueError("a simulated run needs a persona and a topic")
    folder = run_folder(run)
    runlog = RunLog(folder / "run.log")
    meter = Meter(limit_usd=run.cost_limit_usd).restore(run.token_usage or {}, run.cost_usd)
    simulator = StudentSimulator(
        persona, topic, get_llm("simulator", override=_override(run), meter=meter), seed=run.seed or 0
    )
    handle.progress(
        stage=RunStage.RUNNING_SESSION,
        detail=f"Turn 0/{run.max_turns}",
        config=with_llm(run, "simulator", llm_record(simulator.llm, simulator.seed)),
    )
    turn_timeout = float(run.config.get("turn_timeout", 90))
    db = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"store-{run.run_id}"[:40])
    pending: list[Future[None]] = []

    stale_after = float(setting("RUN_STALE_AFTER"))

    def usage() -> dict[str, Any]:
        return {"token_usage": meter.as_dict(), "cost_usd": meter.cost_usd}

    def store(messages: list[dict[str, Any]]) -> None:
        """One turn's commit; a database that is away (restarting, say) is waited for and the whole commit
        made again, up to EVAL_RUN_STALE_AFTER, so a turn is stored whole, in order, or the run fails."""
        retrying(lambda: store_once(messages), what=f"storing a turn of {run.run_id}", for_seconds=stale_after)

    def store_once(messages: list[dict[str, Any]]) -> None:
        stopped = None
        with transaction.atomic():  # the messages and the turn's progress in one commit
            statements.insert_rows(
                RunMessage,
                [
                    {
                        "run": run.pk,
                        "attempt": run.attempt,
                        "turn": message["turn"],
                        "role": message["role"],
                        "content": message["content"],
                        "timestamp": parse_datetime(message["timestamp"]) or timezone.now(),
                        "metadata": message["metadata"],
                    }
                    for message in messages
                ],
            )
            turns = [m["metadata"]["turn_decision"]["turn"] for m in messages if m["role"] == "student"]
            if turns:
                try:
                    handle.progress(turn=turns[-1], detail=f"Turn {turns[-1]}/{run.max_turns}", **usage())
                except RunStopped as exc:
                    stopped = exc  # the messages are kept all the same
        if stopped is not None:
            raise stopped

    async def settled(store: Future[None]) -> None:
        """What a store raised, if anything; awaited only when it has not finished yet, so a store
        that kept pace costs no wake-up of this loop (two a turn)."""
        if store.done():
            store.result()
        else:
            await asyncio.wrap_future(store)

    async def settle_previous() -> None:
        """Wait for the store in flight (by then it has had a whole LLM call's time), so at most one
        is in flight and a cancelled run stops within one turn; raise what it raised (RunStopped, a
        database error)."""
        while pending:
            await settled(pending.pop(0))

    async def in_order(fn: Any, *args: Any) -> None:
        """Queue fn on the run's store thread once the previous store has finished."""
        await settle_previous()
        pending.append(db.submit(fn, *args))

    waiting: list[dict[str, Any]] = []
    """A student message not stored yet: it goes with the tutor's reply to it, one commit a turn."""

    async def store_waiting() -> None:
        """Queue what waits as one store; when the previous store failed, raise and leave what waits
        in place for the failure path to store."""
        await settle_previous()
        batch = waiting[:]
        waiting.clear()
        pending.append(db.submit(store, batch))

    async def on_message(message: dict[str, Any]) -> None:
        waiting.append(message)
        if message["role"] != "student":
            await store_waiting()

    async def on_session(session_id: str) -> None:
        def save() -> None:
            run.config = {**run.config, "session_id": session_id}
            handle.progress(config=run.config)

        await in_order(save)

    async def conversation(target: Any) -> Any:
        try:
            result = await target.converse(
                simulator,
                topic.topic_id,
                max_turns=run.max_turns,
                turn_timeout=turn_timeout,
                on_message=on_message,
                log=runlog,
                on_session=on_session,
            )
            if waiting:  # the last student message, when no reply came to it
                await store_waiting()
        except BaseException:
            # what arrived is stored all the same
            if waiting:
                pending.append(db.submit(store, waiting[:]))
            await asyncio.gather(*map(asyncio.wrap_future, pending), return_exceptions=True)
            raise
        for queued in pending:  # every message is stored before the run goes on; a failed store fails it
            await settled(queued)
        return result

    runlog(
        f"run {run.run_id} attempt {run.attempt}: persona {persona.persona_id}, topic {topic.topic_id}, "
        f"max_turns {run.max_turns}, seed {run.seed}"
    )
    try:
        with tutor_target(run.agent, server_url, meter) as target:
            with asyncio.Runner(loop_factory=conversation_loop) as runner:
                result = runner.run(conversation(target))
            tutor = tutor_record(run.agent, target, result, run.seed)
    finally:
        db.submit(lambda: connection.close()).result()  # the store thread's connection goes back now, not at GC
        db.shutdown()
        runlog.close()
    if not isinstance(target, ChatTarget) and usage_of(tutor).calls:
        # The app ran this tutor (the reference tutor reports its usage in the session state): count it.
        tutor_usage = usage_of(tutor)
        meter.add("tutor", tutor_usage, estimate_cost(str(tutor.get("model") or ""), tutor_usage))
    run.config = {
        **run.config,
        "session_id": result.session_id,
        "ended_by": result.ended_by,
        "end_reason": result.error or "",
        "turns_answered": result.turns_answered,
        "session_state": session_state(result),
        "turn_decisions": [d.as_dict() for d in simulator.turn_decisions],
        "llm": {**(run.config.get("llm") or {}), "tutor": {k: tutor.get(k) for k in RECORD_KEYS}},
    }
    handle.progress(config=run.config, **usage())
    if result.ended_by == "tutor_unreachable":
        # Infrastructure, not the tutor's teaching: not a measurement. The partial transcript stays stored;
        # retry-evaluation judges it on request, and it shows its coverage.
        raise TutorUnavailable(
            f"the tutor became unreachable after {result.turns_answered}/{run.max_turns} answered turns: {result.error}"
        )
    if result.error and not result.judgeable:
        raise TutorUnavailable(result.error)


def session_state(result: SessionResult) -> dict[str, Any]:
    """The tutor's final session state (GET /sessions/{id}), without the logs the run stores as messages."""
    return {k: v for k, v in result.final_state.items() if k not in ("full_conversation_log", "conversation_history")}


def tutor_record(agent: Any, target: Any, result: SessionResult, seed: int | None) -> dict[str, Any]:
    """Which model tutored: the chat endpoint's as resolved here; a protocol tutor's as its final session
    state reports it (the reference tutor does, with its usage); otherwise what the agent row says."""
    if isinstance(target, ChatTarget):
        return llm_record(target.llm, seed)
    reported = result.final_state.get("tutor")
    if isinstance(reported, dict) and reported.get("provider"):
        return reported
    if agent is not None:
        provider, model, source = "external", agent.model or "unknown", f"agent {agent.pk}"
    else:
        # A server reached as the reference tutor that does not say what it runs: not the reference
        # tutor (which always reports itself); spec 001's tutor variables label it when set.
        reached = getattr(target, "base_url", "") or "the tutor server"
        label, variable = tutor_provider_env()
        provider, model = label or "unknown", "unknown"
        source = f"not reported by the tutor at {reached}" + (f"; provider from {variable}" if variable else "")
    return {
        "provider": provider,
        "model": model,
        "source": source,
        "temperature": None,
        "seed": None,
        "seed_sent": False,
    }


def evaluate(handle: RunHandle, answer: LLMResult | None = None) -> tuple[list[dict[str, Any]], Judged]:
    """Judge the stored conversation and store scores and problems (replacing any earlier ones);
    returns the conversation as read and the rows stored, for the reports. `answer`: the judge's answer
    already given by a provider batch (then no call is made)."""
    run, detail = handle.run, "Judging the conversation"
    try:
        llm = get_llm("judge", override=_override(run), meter=_meter(run))
    except Exception:
        handle.progress(stage=RunStage.EVALUATING, detail=detail)  # where it failed
        raise
    config = {**with_llm(run, "judge", llm_record(llm, run.seed)), "judge_config": judge.judge_config(llm.label)}
    handle.progress(stage=RunStage.EVALUATING, detail=detail, config=config)
    messages = run_messages(run)
    if not messages:
        raise ValueError("nothing to evaluate: the run has no messages")
    verdict = judge.judge_conversation(messages, run_persona(run), run_topic(run), llm, seed=run.seed, answer=answer)
    scores = [
        DimensionScore(run=run, dimension=s.dimension, score=s.score, analysis=s.analysis) for s in verdict.scores
    ]
    problems = [
        Problem(
            run=run,
            rank=f.rank,
            title=f.title,
            turns=list(f.turns),
            description=f.description,
            quote=f.quote,
            quote_found=f.quote_found,
            severity=f.severity,
            root_cause=f.root_cause,
        )
        for f in sorted(verdict.findings, key=lambda f: f.rank)
    ]
    with transaction.atomic():
        DimensionScore.objects.filter(run=run).delete()
        Problem.objects.filter(run=run).delete()
        DimensionScore.objects.bulk_create(scores)
        Problem.objects.bulk_create(problems)
        handle.progress(overall_score=verdict.average, summary=verdict.summary, judge_label=verdict.judge_label)
    return messages, (scores, problems)


def finish(handle: RunHandle, judged: tuple[list[dict[str, Any]], Judged]) -> dict[str, Any]:
    """Write the reports of the conversation just judged (its messages and the verdict's rows as
    `evaluate` returns them); returns what the run stores on completion."""
    run = handle.run
    handle.progress(stage=RunStage.GENERATING_REPORTS, detail="Writing reports")
    folder = run_folder(run)
    messages, rows = judged
    reports.write_run_reports(folder, run_report_context(run, messages, rows))
    (folder / "error.txt").unlink(missing_ok=True)
    return {"error": "", "error_traceback": "", "artifacts_dir": str(folder)}


def simulate_and_judge(handle: RunHandle, *, server_url: str | None = None) -> dict[str, Any]:
    """The whole pipeline: (simulate,) judge, report."""
    run = handle.run
    handle.progress(stage=RunStage.LOADING_PERSONA, detail="Loading persona")
    run_folder(run).mkdir(parents=True, exist_ok=True)
    if run.source == RunSource.SIMULATED:
        converse(handle, server_url=server_url)
    return finish(handle, evaluate(handle))


def judge_again(handle: RunHandle) -> dict[str, Any]:
    """Re-judge the stored conversation without simulating it again."""
    run_folder(handle.run).mkdir(parents=True, exist_ok=True)
    return finish(handle, evaluate(handle))


BATCH_KIND = "run_judge"
"""The provider batches that judge finished runs, one line per run (its run id is the custom id)."""


def run_batch(run: EvaluationRun) -> ProviderBatch | None:
    """The newest provider batch that carries this run's judging."""
    return ProviderBatch.objects.filter(kind=BATCH_KIND, custom_ids__has_key=run.run_id).order_by("-created_at").first()


def batch_judge_call(run_id: str) -> BatchCall:
    """One run's line of a judging batch: the judge's call over its stored conversation."""
    run = EvaluationRun.objects.get(run_id=run_id)
    return judge.judge_call(run_messages(run), run_persona(run), run_topic(run), seed=run.seed)


def judge_again_by_batch(handle: RunHandle) -> dict[str, Any]:
    """Re-judge the stored conversation with the answer its provider batch gives; the run shows "waiting on
    the provider's batch (k/n done)" meanwhile. One run of the batch drives it (sends, polls, fetches:
    the first by run id; any other when that one is not running or the batch has not been polled for a
    while, so a driver that died or waits in the queue holds nobody up); the others wait for its answers."""
    run = handle.run
    run_folder(run).mkdir(parents=True, exist_ok=True)
    stored = run_batch(run)
    if stored is None:
        return judge_again(handle)
    llm = get_llm("judge", override=_override(run))  # no meter: each run pays for its own line below

    def waiting(done: int, total: int) -> None:
        handle.progress(stage=RunStage.EVALUATING, detail=f"waiting on the provider's batch ({done}/{total} done)")

    leader = min(stored.custom_ids)
    idle_after = 2 * provider_batch.poll_seconds() + 30.0
    while stored.state in (BatchState.SUBMITTING, BatchState.WAITING):
        waiting(stored.done, stored.total)
        idle = (timezone.now() - stored.updated_at).total_seconds() > idle_after
        leader_away = not EvaluationRun.objects.filter(run_id=leader, status=RunStatus.RUNNING).exists()
        if leader == run.run_id or leader_away or idle:
            provider_batch.batch_continue(
                stored, llm, call_for=batch_judge_call, on_progress=waiting, keep_results=True
            )
        else:
            time.sleep(min(provider_batch.poll_seconds(), 5.0))
        stored.refresh_from_db()
    if stored.state == BatchState.FAILED:
        raise ProviderError(f"the provider's batch failed: {stored.error}")
    answer = provider_batch.kept_result(stored, run.run_id, "judge")
    meter = _meter(run)
    meter.check()  # a run at its cost limit takes no more, as a direct call would not be made
    meter.add("judge", answer.usage, answer.cost_usd, provider=answer.provider, model=answer.model)
    return finish(handle, evaluate(handle, answer=answer))


def after_run(run: EvaluationRun) -> None:
    """Write the group's comparison once its last run has ended (a by-product: never fails the run)."""
    if run.group:
        try:
            finalize_group(run.group)
        except Exception:
            log.warning("comparison for %s failed", run.group, exc_info=True)


def comparison_folder(group: str) -> Path:
    return Path(setting("RUNS_DIR")) / group


def comparison_written(group: str) -> bool:
    """Is the group's comparison there? comparison.md is the last of its files to be written."""
    return (comparison_folder(group) / "comparison.md").exists()


def finalize_group(group: str) -> Path | None:
    """Once every run of the group has ended: store its gate against its baseline (if it has one) and
    write the comparison; idempotent, and again after a retry of one of its runs."""
    if EvaluationRun.objects.filter(group=group, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).exists():
        return None
    runs = group_runs(group)
    checked = group_gate(group, runs)
    if checked is not None:
        BaselineGate.objects.update_or_create(
            group=group,
            defaults={
                "baseline": checked.baseline,
                "outcome": checked.outcome,
                "forced": checked.forced,
                "detail": checked.as_dict(),
            },
        )
    if len(runs) < 2 and checked is None:
        return None
    folder = comparison_folder(group)
    names = dict(
        Persona.objects.filter(persona_id__in={r.get("persona_id") for r in runs}).values_list("persona_id", "name")
    )
    reports.write_comparison(
        folder,
        group,
        runs,
        min_coverage=setting("MIN_COVERAGE"),
        gate=checked,
        realism=group_realism_of(group),
        names=names,
    )
    return folder
