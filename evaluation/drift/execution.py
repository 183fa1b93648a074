"""Drift runs: create, start and execute them (score an agent's stored messages on each dimension)."""

import hashlib
import json
from dataclasses import replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluation.conf import setting
from evaluation.drift.engine import BatchedJudge, CollectingJudge, Judge, MockJudge
from evaluation.drift.scorers import DIMENSIONS, DimensionResult, DriftInput, Msg, Prop, scorer_for
from evaluation.errors import FieldProblem, InvalidInput, NotFound
from evaluation.models import (
    Agent,
    AgentMessage,
    BatchState,
    DimensionScore,
    DriftRun,
    EvaluationRun,
    PropositionScore,
    PropositionSet,
    ProviderBatch,
)
from evaluation.models.runs import RunKind, RunStage
from evaluation.providers import LLM, LLMResult, Meter, ProviderError, ProviderSpec, get_llm, keys_check
from evaluation.providers.batch import batch_run, job_key, kept_result, request_for, wants_batch
from evaluation.runs import services as runs

SAMPLE_SIZE_RANGE = (1, 500)


def agent_lookup(agent_id: str) -> Agent:
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        raise NotFound(f"agent: no agent {agent_id!r}")
    return agent


def known_dimensions() -> tuple[str, ...]:
    """The built-in four, then every other dimension that has propositions loaded, alphabetically."""
    loaded = set(PropositionSet.objects.values_list("dimension", flat=True).distinct())
    return DIMENSIONS + tuple(sorted(loaded - set(DIMENSIONS)))


def propositions_for(agent: Agent, dimension: str) -> tuple[list[Prop], dict[str, Any]]:
    """The agent's own propositions for a dimension plus the universal (_default) ones."""
    props: list[Prop] = []
    extra: dict[str, Any] = {}
    for pset in (
        PropositionSet.objects.filter(dimension=dimension, agent_key__in=["_default", agent.pk])
        .prefetch_related("propositions")
        .order_by("agent_key")
    ):
        extra.update(pset.extra or {})
        props += [Prop(p.proposition_id, p.claim, p.weight, p.inverted, p.extra or {}) for p in pset.propositions.all()]
    return props, extra


def rubric_versions(agent: Agent, dimensions: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Dimension -> a version of the propositions the agent is scored with there (a hash of their ids, claims,
    weights, inversions and settings): a changed claim is another rubric, and its scores another measure."""
    versions = {}
    for dimension in dimensions:
        props, extra = propositions_for(agent, dimension)
        content = [[p.id, p.claim, p.weight, p.inverted, p.extra] for p in props]
        text = json.dumps([content, extra], sort_keys=True, default=str)
        versions[dimension] = hashlib.sha256(text.encode()).hexdigest()[:12]
    return versions


def _msg(m: AgentMessage) -> Msg:
    return Msg(m.agent_id, m.agent.display_name, m.channel, m.recipient, m.text)


def _validate(dimensions: list[str], sample_size: int, judge: str | ProviderSpec | None) -> None:
    problems = []
    known = known_dimensions()
    unknown = [d for d in dimensions if d not in known]
    if unknown:
        problems.append(FieldProblem("dimensions", f"unknown {', '.join(unknown)} (choose from {', '.join(known)})"))
    low, high = SAMPLE_SIZE_RANGE
    if not low <= sample_size <= high:
        problems.append(FieldProblem("sample_size", f"{sample_size} is out of range ({low}-{high})"))
    if isinstance(judge, str) and judge:
        try:
            ProviderSpec.parse(judge)
        except ValueError as exc:
            problems.append(FieldProblem("judge", str(exc)))
    if problems:
        raise InvalidInput(problems)


def drift_run_create(
    *,
    agent: Agent,
    dimensions: list[str] | tuple[str, ...] | None = None,
    sample_size: int = 20,
    judge: str = "",
    source: str = "",
    is_baseline: bool = False,
    user: Any = None,
    batch: bool = False,
) -> EvaluationRun:
    """A queued drift run for the agent (validated; nothing is judged yet). batch: the judge's calls go
    through its vendor's batch API (as they do when its LLM config has options {"batch": true})."""
    chosen = list(dimensions or known_dimensions())
    _validate(chosen, sample_size, judge)
    with runs.capacity_reserved(1):
        run = runs.run_create(
            base_id=f"drift_{timezone.now():%Y%m%d_%H%M%S}_{agent.pk}",
            kind=RunKind.DRIFT,
            agent=agent,
            user=user,
            config={"judge": judge, "batch": True} if batch else {"judge": judge},
        )
        DriftRun.objects.create(
            run=run,
            dimensions=chosen,
            sample_size=sample_size,
            source=source,
            batch_size=setting("DRIFT_BATCH_SIZE"),
            is_baseline=is_baseline,
        )
    return run


def drift_run_start(
    *,
    agent_id: str,
    dimensions: list[str] | None = None,
    sample_size: int = 20,
    judge: str | None = None,
    user: Any = None,
) -> EvaluationRun:
    """Start a background drift evaluation of one agent's newest messages."""
    keys_check(["proposition_judge"], judge, field="judge")
    agent = agent_lookup(agent_id)
    with transaction.atomic():
        run = drift_run_create(
            agent=agent, dimensions=dimensions, sample_size=sample_size, judge=judge or "", user=user
        )
        runs.run_enqueue(run)
    return run


def _score(handle: runs.RunHandle, judge: str | ProviderSpec | None, record_dir: Any) -> dict[str, Any]:
    run = handle.run
    agent = run.agent
    if agent is None:
        raise NotFound(f"agent: drift run {run.run_id} has no agent")
    detail = DriftRun.objects.get(run=run)
    query = AgentMessage.objects.filter(agent=agent).select_related("agent")
    if detail.source:
        query = query.filter(source=detail.source)
    messages = list(query.order_by("-created_at")[: detail.sample_size])[::-1]
    detail.messages_judged = len(messages)
    detail.window_start = messages[0].created_at if messages else None
    detail.window_end = messages[-1].created_at if messages else None
    detail.save(update_fields=["messages_judged", "window_start", "window_end"])
    handle.progress(stage=RunStage.EVALUATING, max_turns=len(detail.dimensions), detail="Scoring")

    def save(meter: Meter) -> None:
        EvaluationRun.objects.filter(pk=run.pk).update(token_usage=meter.as_dict(), cost_usd=meter.cost_usd)

    meter = Meter(on_change=save)
    llm: Judge = get_llm(
        "proposition_judge", override=judge or run.config.get("judge") or None, meter=meter, record_dir=record_dir
    )
    if isinstance(llm, LLM) and llm.provider.name == "replay":
        llm = MockJudge(replay=llm, offline=get_llm("proposition_judge", override="offline", meter=meter))

    def channels() -> dict[str, list[Msg]]:
        out: dict[str, list[Msg]] = {}
        for channel in sorted({m.channel for m in messages}):
            rows = AgentMessage.objects.filter(channel=channel).select_related("agent")
            if detail.source:  # the run's own source only: an ingested message must not change a cast replay
                rows = rows.filter(source=detail.source)
            rows = rows.order_by("-created_at")[: detail.sample_size]
            out[channel] = [_msg(m) for m in reversed(list(rows))]
        return out

    given = DriftInput(
        llm=llm,
        agent_name=agent.display_name,
        persona_spec=agent.persona_spec,
        messages=[_msg(m) for m in messages],
        channels=channels,
        batch_size=detail.batch_size or setting("DRIFT_BATCH_SIZE"),
        names=dict(Agent.objects.filter(kind="character").values_list("id", "display_name")),
    )
    if isinstance(llm, LLM) and (run.config.get("batch") or wants_batch(llm)):
        given = replace(given, llm=_answered_by_batch(handle, llm, given, detail.dimensions, agent))
    results: list[DimensionResult] = []
    judged_by: dict[str, str] = {}
    for index, dimension in enumerate(detail.dimensions, start=1):
        props, extra = propositions_for(agent, dimension)
        results.append(scorer_for(dimension)(given, props, extra))
        judged_by[dimension] = llm.take_used() if isinstance(llm, MockJudge) else llm.label
        handle.progress(turn=index, detail=f"Scored {dimension}")
    detail.judged_by = judged_by
    detail.save(update_fields=["judged_by"])
    with transaction.atomic():
        DimensionScore.objects.bulk_create(
            DimensionScore(
                run=run,
                dimension=r.dimension,
                score=r.score,
                analysis="; ".join(f"{k}={v:.3f}" for k, v in r.metrics.items()),
            )
            for r in results
            if r.score is not None
        )
        PropositionScore.objects.bulk_create(
            PropositionScore(
                evaluation_run=run,
                dimension=r.dimension,
                proposition_id=i.proposition_id,
                score=i.score,
                reasoning=i.reasoning or "-",
                context_snippet=i.snippet,
            )
            for r in results
            for i in r.items
        )
    scored = [r.score for r in results if r.score is not None]
    return {
        "overall_score": round(sum(scored) / len(scored), 3) if scored else None,
        "judge_label": llm.label,
        "token_usage": meter.as_dict(),
        "cost_usd": meter.cost_usd,
        "detail": ", ".join(
            f"{r.dimension} {r.score:.2f}" if r.score is not None else f"{r.dimension} -" for r in results
        ),
    }


BATCH_KIND = "drift_scores"


def _answered_by_batch(
    handle: runs.RunHandle, llm: LLM, given: DriftInput, dimensions: list[str], agent: Agent
) -> BatchedJudge:
    """Score once with the offline rule to learn every call the scorers make, send those calls as one
    provider batch (or resume the stored one of this run and these calls), and answer the real scoring
    from it. The run shows "waiting on the provider's batch (k/n done)" meanwhile."""
    collecting = CollectingJudge(llm=llm, offline=get_llm("proposition_judge", override="offline"))
    probe = replace(given, llm=collecting)
    for dimension in dimensions:
        props, extra = propositions_for(agent, dimension)
        scorer_for(dimension)(probe, props, extra)
    calls = collecting.calls
    keys = [request_for(llm, call).fingerprint() for call in calls]
    job = {"run": handle.run.run_id, "calls": hashlib.sha256("".join(keys).encode()).hexdigest()}
    targets = {f"call-{i}": i for i in range(len(calls))}

    def waiting(done: int, total: int) -> None:
        handle.progress(stage=RunStage.EVALUATING, detail=f"waiting on the provider's batch ({done}/{total} done)")

    applied = (
        ProviderBatch.objects.filter(kind=BATCH_KIND, job_key=job_key(BATCH_KIND, llm, job), state=BatchState.APPLIED)
        .order_by("-created_at")
        .first()
    )
    if applied is None:
        batch_run(
            llm,
            kind=BATCH_KIND,
            job=job,
            targets=targets,
            call_for=lambda i: calls[i],
            store=lambda answers, failed: None,
            on_progress=waiting,
            run_id=handle.run.run_id,
            keep_results=True,
        )
        applied = (
            ProviderBatch.objects.filter(kind=BATCH_KIND, job_key=job_key(BATCH_KIND, llm, job))
            .order_by("-created_at")
            .first()
        )
    answers: dict[str, LLMResult] = {}
    failed: dict[str, str] = {}
    for cid, i in targets.items():
        try:
            answers[keys[i]] = kept_result(applied, cid, llm.role)
        except ProviderError as exc:
            failed[keys[i]] = str(exc)
    return BatchedJudge(llm=llm, answers=answers, failed=failed)


def drift_run_execute(
    run_pk: Any, attempt: int, *, judge: str | ProviderSpec | None = None, record_dir: Any = None
) -> EvaluationRun | None:
    """One attempt of a drift run, through the kernel's lifecycle."""
    return runs.run_execute(run_pk, attempt, lambda handle: _score(handle, judge, record_dir))


def drift_evaluate(
    *,
    agent: Agent,
    dimensions: list[str] | tuple[str, ...] | None = None,
    sample_size: int = 20,
    judge: str | ProviderSpec | None = None,
    source: str | None = "",
    is_baseline: bool = False,
    record_dir: Any = None,
    batch: bool = False,
) -> EvaluationRun:
    """Create and execute a drift run in this process (the harness and the CLI)."""
    run = drift_run_create(
        agent=agent,
        dimensions=dimensions,
        sample_size=sample_size,
        judge=judge.label if isinstance(judge, ProviderSpec) else (judge or ""),
        source=source or "",
        is_baseline=is_baseline,
        batch=batch,
    )
    drift_run_execute(run.pk, run.attempt, judge=judge, record_dir=record_dir)
    run.refresh_from_db()
    return run
