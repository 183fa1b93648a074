"""Business writes that several doors share (API, admin, CLI, dashboard): starting and retrying runs."""

import random
import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from evaluation.conf import setting
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.models import Agent, EvaluationRun, Persona, RunMessage, Topic, TutoringSession
from evaluation.models.runs import RunSource, RunStatus
from evaluation.providers.registry import parse_override
from evaluation.tutoring.topics import topic_as_dict

MAX_TURNS_RANGE = (1, 100)


class RunLimitReached(Exception):
    """Too many runs are active; the caller should try later (HTTP 409)."""


class NotFound(Exception):
    """A named object does not exist (HTTP 404); the message names it."""


def resolve_personas(persona: str) -> list[Persona]:
    """'all', an id ('ace') or a file name ('ace.json'); file paths outside personas/ are refused."""
    value = (persona or "").strip()
    if value == "all":
        return list(Persona.objects.order_by("persona_id"))
    if "/" in value or "\\" in value or value.startswith("."):
        raise InvalidInput(
            [FieldProblem("persona", f"{value!r} must be a persona id or a file name inside personas/, not a path")]
        )
    persona_id = value.removesuffix(".json")
    found = Persona.objects.filter(persona_id=persona_id).first()
    if found is None:
        raise NotFound(f"persona: no persona {persona_id!r}")
    return [found]


def _active_runs() -> int:
    return EvaluationRun.objects.filter(status__in=[RunStatus.PENDING, RunStatus.RUNNING]).count()


def _check_capacity(adding: int) -> None:
    limit = setting("MAX_ACTIVE_RUNS")
    active = _active_runs()
    if active + adding > limit:
        raise RunLimitReached(f"{active} runs are active and the limit is {limit}; {adding} more cannot start now")


def create_run(base_id: str, **fields: Any) -> EvaluationRun:
    """Create a run whose readable id (its report folder) is unique, suffixing _2, _3 on collision."""
    for n in range(1, 1000):
        run_id = base_id if n == 1 else f"{base_id}_{n}"
        try:
            with transaction.atomic():
                return EvaluationRun.objects.create(run_id=run_id, **fields)
        except IntegrityError:
            if not EvaluationRun.objects.filter(run_id=run_id).exists():
                raise
    raise RuntimeError(f"could not find a free run id for {base_id}")


def _enqueue(task: str, run: EvaluationRun) -> None:
    from django_q.tasks import async_task

    transaction.on_commit(
        lambda: async_task(task, str(run.pk), task_name=f"{task.rsplit('.', 1)[-1]} {run.run_id}"[:100])
    )


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
    enqueue: bool = True,
    started_by: str = "api",
) -> list[EvaluationRun]:
    """Create simulated runs (one per persona and repeat) and enqueue them; returns the runs."""
    problems = []
    if not MAX_TURNS_RANGE[0] <= max_turns <= MAX_TURNS_RANGE[1]:
        problems.append(
            FieldProblem("max_turns", f"{max_turns} is out of range ({MAX_TURNS_RANGE[0]}-{MAX_TURNS_RANGE[1]})")
        )
    if not 1 <= runs_per_persona <= 20:
        problems.append(FieldProblem("runs_per_persona", f"{runs_per_persona} is out of range (1-20)"))
    if provider:
        try:
            parse_override(provider)
        except ValueError as exc:
            problems.append(FieldProblem("provider", str(exc)))
    if problems:
        raise InvalidInput(problems)
    topic = Topic.objects.filter(topic_id=topic_id).first()
    if topic is None:
        raise NotFound(f"topic_id: no topic {topic_id!r}")
    agent = None
    if agent_id:
        agent = Agent.objects.filter(pk=agent_id).first()
        if agent is None:
            raise NotFound(f"target: no agent {agent_id!r}")
    personas: list[Persona] = []
    for name in [persona] if isinstance(persona, str) else persona:
        personas += [p for p in resolve_personas(name) if p not in personas]
    if not personas:
        raise NotFound("persona: no personas are loaded (run manage.py load_catalog)")
    count = len(personas) * runs_per_persona
    base_seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
    stamp = timezone.now().strftime("%Y%m%d_%H%M%S")
    group = f"comparison_{stamp}_{uuid.uuid4().hex[:6]}" if count > 1 else ""
    runs = []
    with transaction.atomic():
        _check_capacity(count)
        for index, p in enumerate(personas):
            for repeat in range(1, runs_per_persona + 1):
                suffix = f"_r{repeat}" if runs_per_persona > 1 else ""
                run = create_run(
                    f"run_{stamp}_{p.persona_id}{suffix}",
                    kind="tutor",
                    source=RunSource.SIMULATED,
                    persona=p,
                    topic=topic,
                    agent=agent,
                    max_turns=max_turns,
                    seed=base_seed + index * 1000 + repeat,
                    group=group,
                    repeat_index=repeat,
                    cost_limit_usd=cost_limit_usd,
                    config={
                        "topic_id": topic.topic_id,
                        "persona_id": p.persona_id,
                        "max_turns": max_turns,
                        "turn_timeout": turn_timeout,
                        "target": agent.pk if agent else "reference",
                        "provider": provider or "",
                        "seed": base_seed + index * 1000 + repeat,
                        "started_by": started_by,
                        "timestamp": timezone.now().isoformat(),
                    },
                )
                runs.append(run)
                if enqueue:
                    _enqueue("evaluation.tasks.run_execute_task", run)
    return runs


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


def session_evaluation_start(*, session_id: str, provider: str | None = None, enqueue: bool = True) -> EvaluationRun:
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
    topic_ctx = (session.state or {}).get("topic") or topic_as_dict(session.topic)
    stamp = timezone.now().strftime("%Y%m%d_%H%M%S")
    with transaction.atomic():
        _check_capacity(1)
        run = create_run(
            f"run_{stamp}_session",
            kind="tutor",
            source=RunSource.EXISTING_SESSION,
            source_session_id=session.pk,
            topic=session.topic,
            max_turns=len(messages),
            config={"session_id": str(session.pk), "topic": topic_ctx, "provider": provider or "", "started_by": "api"},
        )
        now = timezone.now()
        RunMessage.objects.bulk_create(
            RunMessage(run=run, turn=m["turn"], role=m["role"], content=m["content"], timestamp=now) for m in messages
        )
        if enqueue:
            _enqueue("evaluation.tasks.run_execute_task", run)
    return run


def run_retry_evaluation_start(*, run: EvaluationRun, enqueue: bool = True) -> EvaluationRun:
    if run.is_active:
        raise RunLimitReached(f"run {run.run_id} is still {run.status}")
    if not run.messages.exists():
        raise InvalidInput([FieldProblem("run", f"run {run.run_id} has no stored conversation to evaluate")])
    if enqueue:
        with transaction.atomic():
            EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.PENDING, detail="Waiting to re-evaluate")
            _enqueue("evaluation.tasks.run_retry_evaluation_task", run)
    return run


def run_lookup(run_id: str) -> EvaluationRun:
    """A run by readable id or UUID."""
    query = Q(run_id=run_id)
    try:
        query |= Q(pk=uuid.UUID(run_id))
    except ValueError:
        pass
    run = EvaluationRun.objects.select_related("persona", "topic", "agent").filter(query).first()
    if run is None:
        raise NotFound(f"run: no run {run_id!r}")
    return run


def suite_run_start(
    *, suite_id: int, model: str | None = None, judge_model: str | None = None, judge: bool = True, enqueue: bool = True
) -> EvaluationRun:
    """Start a background run of one discovered suite."""
    from evaluation.models import Suite
    from evaluation.suites.store import suite_run_create

    suite = Suite.objects.filter(pk=suite_id).first()
    if suite is None:
        raise NotFound(f"suite: no suite {suite_id}")
    for field, value in (("model", model), ("judge_model", judge_model)):
        if value:
            try:
                from evaluation.suites.runner import model_spec

                model_spec(value)
            except ValueError as exc:
                raise InvalidInput([FieldProblem(field, str(exc))]) from None
    with transaction.atomic():
        _check_capacity(1)
        run = suite_run_create(suite=suite, model=model, judge_model=judge_model, judge=judge)
        if enqueue:
            _enqueue("evaluation.tasks.suite_run_task", run)
    return run


def drift_run_start(
    *,
    agent_id: str,
    dimensions: list[str] | None = None,
    sample_size: int = 20,
    judge: str | None = None,
    enqueue: bool = True,
) -> EvaluationRun:
    """Start a background drift evaluation of one agent's newest messages."""
    from evaluation.drift.evaluate import DIMENSIONS, drift_run_create

    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        raise NotFound(f"agent: no agent {agent_id!r}")
    if judge:
        try:
            parse_override(judge)
        except ValueError as exc:
            raise InvalidInput([FieldProblem("judge", str(exc))]) from None
    with transaction.atomic():
        _check_capacity(1)
        try:
            run = drift_run_create(
                agent=agent, dimensions=dimensions or list(DIMENSIONS), sample_size=sample_size, judge=judge or ""
            )
        except ValueError as exc:
            field, _, reason = str(exc).partition(": ")
            raise InvalidInput([FieldProblem(field, reason)]) from None
        if enqueue:
            _enqueue("evaluation.tasks.drift_run_task", run)
    return run


def agent_lookup(agent_id: str) -> Agent:
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        raise NotFound(f"agent: no agent {agent_id!r}")
    return agent
