"""Drift evaluation runs: score an agent's stored messages on the four dimensions and store it all."""

from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluation.conf import setting
from evaluation.drift.scorers import (
    DimensionResult,
    Msg,
    Prop,
    score_adherence,
    score_consistency,
    score_convergence,
    score_fluency,
)
from evaluation.models import Agent, AgentMessage, DimensionScore, EvaluationRun, PropositionScore, PropositionSet
from evaluation.models.runs import RunStage, RunStatus
from evaluation.providers import Meter, ProviderSpec, get_llm

DIMENSIONS = ("adherence", "consistency", "fluency", "convergence")


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


def _msg(m: AgentMessage) -> Msg:
    return Msg(m.agent_id, m.agent.display_name, m.channel, m.recipient, m.text)


def drift_run_create(
    *,
    agent: Agent,
    dimensions: tuple[str, ...] | list[str] = DIMENSIONS,
    sample_size: int = 20,
    judge: str = "",
    source: str | None = None,
    is_baseline: bool = False,
) -> EvaluationRun:
    """A pending drift run for the agent (validated; nothing is judged yet)."""
    unknown = [d for d in dimensions if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"dimensions: unknown {', '.join(unknown)} (choose from {', '.join(DIMENSIONS)})")
    if not 1 <= sample_size <= 500:
        raise ValueError(f"sample_size: {sample_size} is out of range (1-500)")
    from evaluation.services import create_run

    return create_run(
        f"drift_{timezone.now():%Y%m%d_%H%M%S}_{agent.pk}",
        kind="drift",
        agent=agent,
        dimensions=list(dimensions),
        is_baseline=is_baseline,
        config={
            "judge": judge,
            "sample_size": sample_size,
            "source": source or "",
            "batch_size": setting("DRIFT_BATCH_SIZE"),
        },
    )


def drift_run_execute(run_pk: Any, *, judge: str | ProviderSpec | None = None, record_dir: Any = None) -> EvaluationRun:
    """Score the agent's newest messages (of the run's source, if set) and store everything."""
    run = EvaluationRun.objects.select_related("agent").get(pk=run_pk)
    agent = run.agent
    assert agent is not None, f"drift run {run.run_id} has no agent"
    sample_size = int(run.config.get("sample_size", 20))
    query = AgentMessage.objects.filter(agent=agent).select_related("agent")
    if run.config.get("source"):
        query = query.filter(source=run.config["source"])
    messages = list(query.order_by("-created_at")[:sample_size])[::-1]
    run.status, run.stage, run.started_at = RunStatus.RUNNING, RunStage.EVALUATING, timezone.now()
    run.sample_size = len(messages)
    run.window_start = messages[0].created_at if messages else None
    run.window_end = messages[-1].created_at if messages else None
    run.save()

    def save(meter: Meter) -> None:
        EvaluationRun.objects.filter(pk=run.pk).update(token_usage=meter.as_dict(), cost_usd=meter.cost_usd)

    meter = Meter(on_change=save)
    try:
        llm = get_llm(
            "proposition_judge", override=judge or run.config.get("judge") or None, meter=meter, record_dir=record_dir
        )
        size = int(run.config.get("batch_size") or setting("DRIFT_BATCH_SIZE"))
        results: list[DimensionResult] = []
        msgs = [_msg(m) for m in messages]
        for dimension in run.dimensions:
            props, extra = propositions_for(agent, dimension)
            if dimension == "adherence":
                results.append(score_adherence(llm, props, extra, msgs, agent.persona_spec, size))
            elif dimension == "consistency":
                results.append(score_consistency(llm, props, extra, msgs, size))
            elif dimension == "fluency":
                results.append(score_fluency(llm, props, extra, msgs, size))
            else:
                channels: dict[str, list[Msg]] = {}
                for channel in sorted({m.channel for m in messages}):
                    rows = (
                        AgentMessage.objects.filter(channel=channel)
                        .select_related("agent")
                        .order_by("-created_at")[:sample_size]
                    )
                    channels[channel] = [_msg(m) for m in reversed(list(rows))]
                results.append(score_convergence(llm, props, extra, channels, agent.display_name, size))
        with transaction.atomic():
            for result in results:
                if result.score is not None:
                    DimensionScore.objects.create(
                        run=run,
                        dimension=result.dimension,
                        score=result.score,
                        analysis="; ".join(f"{k}={v:.3f}" for k, v in result.metrics.items()),
                    )
                PropositionScore.objects.bulk_create(
                    PropositionScore(
                        evaluation_run=run,
                        dimension=result.dimension,
                        proposition_id=i.proposition_id,
                        score=i.score,
                        reasoning=i.reasoning or "-",
                        context_snippet=i.snippet,
                    )
                    for i in result.items
                )
            scored = [r.score for r in results if r.score is not None]
            run.overall_score = round(sum(scored) / len(scored), 3) if scored else None
            run.status, run.stage, run.completed_at = RunStatus.COMPLETED, RunStage.COMPLETE, timezone.now()
            run.judge_label = llm.label
            run.token_usage, run.cost_usd = meter.as_dict(), meter.cost_usd
            run.detail = ", ".join(
                f"{r.dimension} {r.score:.2f}" if r.score is not None else f"{r.dimension} -" for r in results
            )
            run.save()
    except Exception as exc:
        run.status, run.stage, run.error, run.completed_at = (
            RunStatus.FAILED,
            RunStage.FAILED,
            f"{type(exc).__name__}: {exc}",
            timezone.now(),
        )
        run.save()
    return run


def drift_evaluate(
    *,
    agent: Agent,
    dimensions: tuple[str, ...] | list[str] = DIMENSIONS,
    sample_size: int = 20,
    judge: str | ProviderSpec | None = None,
    source: str | None = None,
    is_baseline: bool = False,
    record_dir: Any = None,
) -> EvaluationRun:
    """Create and execute a drift run in this process."""
    run = drift_run_create(
        agent=agent,
        dimensions=dimensions,
        sample_size=sample_size,
        judge=str(judge or ""),
        source=source,
        is_baseline=is_baseline,
    )
    return drift_run_execute(run.pk, judge=judge, record_dir=record_dir)


def dimension_scores(run: EvaluationRun) -> dict[str, float]:
    return {s.dimension: s.score for s in run.dimension_scores.all()}
