"""Tutoring writes: start simulated runs and session evaluations, retry them, and execute them."""

import random
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluation.conf import setting
from evaluation.errors import Conflict, FieldProblem, InvalidInput, NotFound, PlainMessage
from evaluation.models import EvaluationRun, ProviderBatch, RunMessage, Topic, TutoringSession
from evaluation.models.runs import RunKind, RunSource
from evaluation.providers import ProviderSpec, get_llm, keys_check
from evaluation.providers import batch as provider_batch
from evaluation.runs import noise
from evaluation.runs import services as runs
from evaluation.runs.broadcast import Listener
from evaluation.tutoring import pipeline, selectors
from evaluation.tutoring.batch import execute_batch
from evaluation.tutoring.catalog_files import file_changes, fingerprint, persona_fields, topic_fields
from evaluation.tutoring.client import TutorUnavailable
from evaluation.tutoring.forecast import run_forecast
from evaluation.tutoring.judge import judge_config
from evaluation.tutoring.personas import KNOWN_KEYS as PERSONA_KEYS
from evaluation.tutoring.personas import split_known, validate_persona
from evaluation.tutoring.planner import run_plan
from evaluation.tutoring.regression import DEFAULT_THRESHOLD, RULES, baseline_means, counted, mismatches
from evaluation.tutoring.server import ForeignServer, ServerProcess, check_install, own_server_env
from evaluation.tutoring.sessions import SessionComplete, session_advance, session_create, session_open
from evaluation.tutoring.start_input import (
    SEED_RANGE,
    approved_topic,
    gate_problems,
    resolve_personas,
    start_agent,
    start_personas,
    start_problems,
)
from evaluation.tutoring.topics import KNOWN_KEYS as TOPIC_KEYS
from evaluation.tutoring.topics import topic_as_dict, validate_topic

REGRESSION_RULES = RULES

__all__ = [
    "PERSONA_KEYS",
    "REGRESSION_RULES",
    "SEED_RANGE",
    "ForeignServer",
    "ServerProcess",
    "SessionComplete",
    "TOPIC_KEYS",
    "TutorUnavailable",
    "check_install",
    "file_changes",
    "fingerprint",
    "own_server_env",
    "persona_fields",
    "resolve_personas",
    "run_execute",
    "run_forecast",
    "run_plan",
    "replay_seed",
    "run_retry_evaluation_start",
    "runs_retry_evaluation_by_batch",
    "run_start",
    "runs_execute_here",
    "session_advance",
    "session_create",
    "session_evaluation_start",
    "session_open",
    "split_known",
    "topic_fields",
    "validate_persona",
    "validate_topic",
]


class BatchNotStarted(PlainMessage, Exception):
    """A batch's shared set-up (its tutor server) failed before any of its runs began."""


def run_start(
    *,
    topic_id: str,
    persona: str | list[str] = "average_student",
    max_turns: int = 20,
    runs_per_persona: int = 1,
    seed: int | None = None,
    agent_id: str | None = None,
    provider: str | None = None,
    turn_timeout: float = 90.0,
    cost_limit_usd: float | None = None,
    grade: int | None = None,
    baseline: str | None = None,
    regression_threshold: float = DEFAULT_THRESHOLD,
    regression_rule: str = "noise-aware",
    force_baseline: bool = False,
    alpha: float = noise.ALPHA,
    power: float = noise.POWER,
    enqueue: bool = True,
    started_by: str = "api",
    user: Any = None,
    tutor_here: bool = True,
) -> list[EvaluationRun]:
    """Create simulated runs (one per persona and repeat) and enqueue them; returns the runs. An unapproved
    topic is refused. Where the file of the topic or a persona changed since it was loaded, each run's
    config holds `catalog_warnings` (catalog_files.file_changes) for the door to show.

    baseline: a comparison group (or one run) whose scores this batch's comparison checks for
    regressions (regression.gate); a baseline that does not compare (another judge, judge prompt, rubric
    version, topic, max turns, or personas it lacks) is refused unless forced.

    tutor_here: the reference tutor runs with this process's settings (the web process serves the
    session protocol; the CLI's own server inherits its environment), so its provider's key is checked
    here too; False for a server the caller was pointed at, which resolves its own."""
    problems = start_problems(
        max_turns=max_turns, runs_per_persona=runs_per_persona, grade=grade, provider=provider, seed=seed
    )
    if regression_rule not in RULES:
        problems.append(FieldProblem("regression_rule", f"{regression_rule!r} is not one of {', '.join(RULES)}"))
    if regression_threshold < 0:
        problems.append(FieldProblem("regression_threshold", f"{regression_threshold} must be 0 or more"))
    problems += gate_problems(alpha=alpha, power=power)
    if problems:
        raise InvalidInput(problems)
    keys_check(["simulator", "judge"], provider, field="provider")
    topic = approved_topic(topic_id)
    agent = start_agent(agent_id)
    if tutor_here and (agent is None or agent.kind == agent.Kind.REFERENCE):
        keys_check(["tutor"], None, field="target")  # the reference tutor calls its configured provider
    personas = start_personas(persona)
    against = (
        _baseline(
            baseline,
            judge_config(get_llm("judge", override=provider).label),
            topic=topic.topic_id,
            personas=[p.persona_id for p in personas],
            max_turns=max_turns,
            threshold=regression_threshold,
            rule=regression_rule,
            force=force_baseline,
            alpha=alpha,
            power=power,
        )
        if baseline
        else None
    )
    catalog_warnings = file_changes([topic, *personas])
    count = len(personas) * runs_per_persona
    base_seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
    stamp = timezone.now().strftime("%Y%m%d_%H%M%S")
    # A batch checked against a baseline is a group even of one run: its gate is stored with the group.
    group = f"comparison_{stamp}_{uuid.uuid4().hex[:6]}" if count > 1 or against else ""
    created = []
    with runs.capacity_reserved(count, queue=enqueue):
        for index, p in enumerate(personas):
            for repeat in range(1, runs_per_persona + 1):
                suffix = f"_r{repeat}" if runs_per_persona > 1 else ""
                run_seed = replay_seed(base_seed, index, repeat)
                run = runs.run_create(
                    base_id=f"run_{stamp}_{p.persona_id}{suffix}",
                    kind=RunKind.TUTOR,
                    user=user,
                    source=RunSource.SIMULATED,
                    persona=p,
                    topic=topic,
                    agent=agent,
                    max_turns=max_turns,
                    seed=run_seed,
                    group=group,
                    repeat_index=repeat,
                    cost_limit_usd=cost_limit_usd,
                    # Only what has no column of its own (run_config() shows both together).
                    config={
                        "turn_timeout": turn_timeout,
                        "target": agent.pk if agent else "reference",
                        "provider": provider or "",
                        "batch_seed": base_seed,
                        **({"grade": grade} if grade is not None else {}),
                        **({"baseline": against} if against else {}),
                        **({"catalog_warnings": catalog_warnings} if catalog_warnings else {}),
                        "started_by": started_by,
                        "timestamp": timezone.now().isoformat(),
                    },
                )
                created.append(run)
                if enqueue:
                    runs.run_enqueue(run)
                else:
                    runs.run_hold(run)
    return created


def _baseline(
    ref: str,
    ours: dict[str, str],
    *,
    topic: str,
    personas: list[str],
    max_turns: int,
    threshold: float,
    rule: str,
    force: bool,
    alpha: float = noise.ALPHA,
    power: float = noise.POWER,
) -> dict[str, Any]:
    """What a batch's gate checks against: the baseline's means per persona, the rule, and whether it
    compares (judge, judge prompt, rubric version, topic, personas, max turns); refused unless forced."""
    runs = [r for r in selectors.baseline_runs(ref) if counted(r, setting("MIN_COVERAGE"))]
    if not runs:
        raise NotFound(f"baseline: no scored tutor runs in a group or run named {ref!r}")
    differs = mismatches(runs, judge_config=ours, topic=topic, personas=personas, max_turns=max_turns)
    if differs and not force:
        raise InvalidInput(
            [
                FieldProblem(
                    "baseline",
                    f"{ref} does not compare with this batch: {'; '.join(differs)} "
                    "(force the baseline to compare anyway; the comparison is then labelled forced)",
                )
            ]
        )
    return {
        "id": ref,
        "judge": ", ".join(sorted({r["judge"] for r in runs})),
        "judge_config": ours,
        "forced": bool(differs),
        "mismatches": differs,
        "rule": rule,
        "threshold": threshold,
        "alpha": alpha,
        "power": power,
        "means": baseline_means(runs),
        # each run's scores, persona, topic and seed: the noise model's spread and pairs (regression.gate)
        "runs": [{k: r.get(k) for k in ("run_id", "persona_id", "topic", "seed", "scores")} for r in runs],
    }


def replay_seed(batch_seed: int, persona_index: int, repeat: int) -> int:
    """The seed of a batch's run: the batch seed for its first persona's first run, so that `--seed` with a
    run's recorded seed, that persona and one run per persona replays the run."""
    return batch_seed + persona_index * 1000 + repeat - 1


def _session_messages(session: TutoringSession) -> list[dict[str, Any]]:
    """From full_conversation_log (preferred) or conversation_history; 'teacher' becomes 'tutor'."""
    source = session.full_conversation_log or session.conversation_history or []
    out = []
    for index, m in enumerate(source, start=1):
        role = m.get("role", "")
        out.append(
            {
                "turn": index,
                "role": "tutor" if role in ("teacher", "assistant", "tutor") else "student",
                "content": str(m.get("content", "")),
                "timestamp": m.get("timestamp"),
            }
        )
    return out


def session_evaluation_start(
    *, session_id: str, provider: str | None = None, enqueue: bool = True, user: Any = None
) -> EvaluationRun:
    """Evaluate a stored tutoring session: copy its messages into a run and enqueue the judge."""
    try:
        session = TutoringSession.objects.select_related("topic").filter(pk=uuid.UUID(str(session_id))).first()
    except ValueError:
        raise InvalidInput([FieldProblem("session_id", f"{session_id!r} is not a UUID")]) from None
    if session is None:
        raise NotFound(f"session_id: no session {session_id}")
    messages = _session_messages(session)
    if not messages:
        raise InvalidInput([FieldProblem("session_id", "the session has no messages to evaluate")])
    if provider:
        try:
            ProviderSpec.parse(provider)
        except ValueError as exc:
            raise InvalidInput([FieldProblem("provider", str(exc))]) from None
    keys_check(["judge"], provider, field="provider")
    # Spec 001: the topic context comes from the session's own state when it carries one.
    state_topic = (session.state or {}).get("topic")
    topic_ctx = state_topic if isinstance(state_topic, dict) and state_topic else topic_as_dict(session.topic)
    topic = Topic.objects.filter(topic_id=str(topic_ctx.get("topic_id") or "")).first() or session.topic
    stamp = timezone.now().strftime("%Y%m%d_%H%M%S")
    with runs.capacity_reserved(1, queue=enqueue):
        run = runs.run_create(
            base_id=f"run_{stamp}_session",
            kind=RunKind.TUTOR,
            user=user,
            source=RunSource.EXISTING_SESSION,
            source_session_id=session.pk,
            topic=topic,
            max_turns=len(messages),
            config={"session_id": str(session.pk), "topic": topic_ctx, "provider": provider or "", "started_by": "api"},
        )
        now = timezone.now()
        RunMessage.objects.bulk_create(
            RunMessage(run=run, turn=m["turn"], role=m["role"], content=m["content"], timestamp=now) for m in messages
        )
        if enqueue:
            runs.run_enqueue(run)
    return run


def run_retry_evaluation_start(*, run: EvaluationRun, user: Any = None) -> EvaluationRun:
    """Queue a new attempt that re-judges the stored conversation without simulating it again."""
    if not run.messages.exists():
        raise Conflict(f"run {run.run_id} has no stored conversation to evaluate")
    return runs.run_requeue(run, action="evaluate", detail="Waiting to re-evaluate", user=user)


BATCH_ACTION = "batch_eval"
"""The queue action of a re-evaluation whose judge's answer comes from a provider batch."""


def runs_retry_evaluation_by_batch(*, run_ids: list[str], user: Any = None) -> list[Any]:
    """Re-judge many finished runs through the judge's batch API: one provider batch per judge (one line a
    run, its run id the custom id), stored before any run is queued; each run's new attempt waits on it
    ("waiting on the provider's batch (k/n done)") and takes its own answer. Returns the stored batches."""
    if not run_ids:
        raise InvalidInput([FieldProblem("runs", "name at least one finished run")])
    runs_to_judge = list(EvaluationRun.objects.filter(run_id__in=run_ids))
    unknown = sorted(set(run_ids) - {r.run_id for r in runs_to_judge})
    if unknown:
        raise NotFound(f"no run {', '.join(unknown[:20])}")
    empty = [r.run_id for r in runs_to_judge if r.kind != RunKind.TUTOR or not r.messages.exists()]
    if empty:
        raise Conflict(f"no stored tutor conversation to evaluate: {', '.join(sorted(empty)[:20])}")
    spent = [
        f"{r.run_id} (${r.cost_usd:.4f} of ${r.cost_limit_usd:.4f})"
        for r in runs_to_judge
        if r.cost_limit_usd is not None and (r.cost_usd or 0.0) >= r.cost_limit_usd
    ]
    if spent:  # a direct re-judge would stop at the limit before its call: no line is bought for these
        raise Conflict(f"cost limit reached, nothing sent: {', '.join(sorted(spent)[:20])}")
    by_judge: dict[str, tuple[Any, list[EvaluationRun]]] = {}
    for run in runs_to_judge:
        llm = get_llm("judge", override=run.config.get("provider") or None)
        provider_batch.vendor_for(llm)  # a provider without a batch API is refused before anything is queued
        key = f"{llm.label}@{llm.spec.base_url}"
        by_judge.setdefault(key, (llm, []))[1].append(run)
    stored = []
    with transaction.atomic():
        for llm, group in by_judge.values():
            ids = sorted(r.run_id for r in group)
            job = {"runs": ids, "judge": llm.label, "attempts": {r.run_id: r.attempt + 1 for r in group}}
            stored.append(
                ProviderBatch.objects.create(
                    vendor=llm.provider.name,
                    model=llm.provider.model,
                    base_url=llm.spec.base_url,
                    kind=pipeline.BATCH_KIND,
                    job_key=provider_batch.job_key(pipeline.BATCH_KIND, llm, job),
                    job=job,
                    custom_ids={run_id: run_id for run_id in ids},
                    total=len(ids),
                )
            )
            for run in group:
                runs.run_requeue(run, action=BATCH_ACTION, detail="Waiting to re-evaluate by batch", user=user)
    return stored


def run_execute(
    run_pk: Any,
    attempt: int,
    action: str = "execute",
    *,
    server_url: str | None = None,
    listener: Listener | None = None,
) -> EvaluationRun | None:
    """One attempt of a tutor run, through the kernel's lifecycle ('evaluate' re-judges only)."""
    if action == "evaluate":
        work = pipeline.judge_again
    elif action == BATCH_ACTION:
        work = pipeline.judge_again_by_batch
    else:

        def work(handle: runs.RunHandle) -> dict[str, Any]:
            return pipeline.simulate_and_judge(handle, server_url=server_url)

    return runs.run_execute(
        run_pk, attempt, work, on_failure=pipeline.on_failure, after=pipeline.after_run, listener=listener
    )


def runs_execute_here(
    created: list[EvaluationRun],
    *,
    workers: int = 1,
    server_url: str | None = None,
    manage_server: bool = True,
    listener: Listener | None = None,
) -> list[EvaluationRun]:
    """Execute created runs in this process (the CLI), on N threads sharing one tutor server."""

    def one(run: EvaluationRun, url: str | None) -> None:
        run_execute(run.pk, run.attempt, server_url=url, listener=listener)

    def not_started(run: EvaluationRun, exc: Exception) -> None:
        """The batch could not start: the run ends failed through the lifecycle (error.txt included)."""

        def work(handle: runs.RunHandle) -> dict[str, Any]:
            raise BatchNotStarted(f"the batch could not start: {exc}") from None

        runs.run_execute(
            run.pk, run.attempt, work, on_failure=pipeline.on_failure, after=pipeline.after_run, listener=listener
        )

    with runs.runs_held(created):  # stopped early (Ctrl-C, SIGTERM, an error): what is left is cancelled
        return execute_batch(
            created,
            one,
            workers=workers,
            server_url=server_url,
            manage_server=manage_server,
            not_started=not_started,
        )


def persona_ground(*, persona_id: str, grounding: dict[str, Any]) -> None:
    """Store grounding values on a persona (its `grounding`), checked against personas/schema.json first."""
    persona = selectors.persona_get(persona_id)
    document = {**selectors.persona_as_dict(persona), "grounding": grounding}
    problems = validate_persona(document, file=f"persona {persona_id}")
    if problems:
        raise InvalidInput(problems)
    persona.grounding = grounding
    persona.save(update_fields=["grounding", "updated_at"])
