"""Tutoring reads: conversations, judgements, report contexts, the run list and comparisons."""

from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Max, QuerySet
from django.utils.dateparse import parse_date

from evaluation.conf import setting
from evaluation.errors import NotFound
from evaluation.models import Agent, DimensionScore, EvaluationRun, Persona, Problem, RunMessage, Topic, TutoringSession
from evaluation.models.runs import ACTIVE_STATUSES
from evaluation.redact import redact
from evaluation.runs.selectors import run_people_values, run_scores, run_usage, runs_filter, runs_with_results
from evaluation.tutoring.fidelity import simulator_fidelity
from evaluation.tutoring.personas import persona_as_dict, persona_schema
from evaluation.tutoring.realism_sets import (
    DEFAULT_REFERENCE,
    group_realism,
    next_turn_forecast,
    next_turn_reports,
    persona_fit,
    persona_grounding_proposal,
    persona_realism,
    realism_cards,
    realism_note,
    reference_table,
    simulator_label,
)
from evaluation.tutoring.regression import Gate, counted, gate
from evaluation.tutoring.reports import (
    ARTIFACTS,
    comparison_data,
    group_judges,
    judge_row_key,
    runs_by_judge,
    shown_interval,
)
from evaluation.tutoring.rubric import DIMENSIONS
from evaluation.tutoring.sessions import session_lookup, session_public_state
from evaluation.tutoring.topics import topic_as_dict
from evaluation.tutoring.values import PersonaSpec, TopicSpec

DOWNLOADABLE = (*ARTIFACTS, "error.txt", "judge_raw.txt")

__all__ = [
    "DOWNLOADABLE",
    "run_files",
    "ARTIFACTS",
    "DIMENSIONS",
    "RUN_FILTERS",
    "RunCard",
    "comparison_context",
    "comparison_summary",
    "conversation",
    "baseline_runs",
    "group_baseline",
    "group_runs",
    "group_gate",
    "group_realism_of",
    "run_realism",
    "run_coverage",
    "Coverage",
    "persona_as_dict",
    "persona_schema",
    "persona_get",
    "persona_list",
    "DEFAULT_REFERENCE",
    "persona_realism",
    "persona_grounding_proposal",
    "next_turn_reports",
    "next_turn_forecast",
    "persona_fit",
    "realism_cards",
    "reference_table",
    "Judged",
    "run_evaluation",
    "run_list_page",
    "run_messages",
    "run_fidelity",
    "run_models",
    "run_config",
    "run_persona",
    "run_report_context",
    "run_topic",
    "session_lookup",
    "session_public_state",
    "start_form_choices",
    "ScoreTrends",
    "score_trends",
    "runs_filtered",
    "tutor_runs_filtered",
    "topic_as_dict",
    "topic_get",
    "topic_list",
]


def conversation(run: EvaluationRun) -> QuerySet[RunMessage]:
    """The run's conversation: the messages of the newest attempt that stored any (attempts never mix)."""
    latest = RunMessage.objects.filter(run=run).aggregate(n=Max("attempt"))["n"]
    return RunMessage.objects.filter(run=run, attempt=latest or 1).order_by("turn", "id")


def run_messages(run: EvaluationRun) -> list[dict[str, Any]]:
    """The messages of `conversation(run)` as plain values, in one query: newest attempt first, so the
    rows wanted are the leading ones with the first row's attempt (an older attempt's rows are read and
    dropped, where the queryset would first ask which attempt is the newest)."""
    rows = RunMessage.objects.filter(run=run).order_by("-attempt", "turn", "id")
    fields = ("attempt", "turn", "role", "content", "timestamp", "metadata")
    messages: list[dict[str, Any]] = []
    newest = None
    for attempt, turn, role, content, timestamp, metadata in rows.values_list(*fields):
        if newest is None:
            newest = attempt
        elif attempt != newest:
            break
        messages.append(
            {"turn": turn, "role": role, "content": content, "timestamp": timestamp.isoformat(), "metadata": metadata}
        )
    return messages


Judged = tuple[list[DimensionScore], list[Problem]]
"""A verdict's rows as the judge stage just stored them: its scores in order, its problems by rank."""


def run_evaluation(
    run: EvaluationRun, messages: list[dict[str, Any]] | None = None, judged: Judged | None = None
) -> dict[str, Any] | None:
    """The judge's verdict on the run; `messages`, when the caller already read them, and `judged`,
    the rows the caller just stored, save reading them again."""
    if judged is not None:
        scores, problems = judged
    else:
        scores = list(DimensionScore.objects.filter(run=run).order_by("id"))
        problems = list(Problem.objects.filter(run=run).order_by("rank")) if scores else []
    if not scores:
        return None
    return {
        "scores": {s.dimension: s.score for s in scores},
        "avg_score": run.overall_score,
        "dimension_analysis": {s.dimension: s.analysis for s in scores},
        "problems": [
            {
                "rank": p.rank,
                "title": p.title,
                "turns": p.turns,
                "description": p.description,
                "quote": p.quote,
                "quote_found": p.quote_found,
                "severity": p.severity,
                "root_cause": p.root_cause,
            }
            for p in problems
        ],
        "summary": run.summary,
        "judge": run.judge_label,
        "offline": run.judge_label.startswith("offline/"),
        "models": run_models(run),
        "simulator_fidelity": run_fidelity(run, messages),
        "simulator_realism": run_realism(run),
    }


def run_realism(run: EvaluationRun) -> dict[str, Any] | None:
    """What the realism card says of the students this run's persona and simulator play (None for a real session,
    or before enough runs of them)."""
    if run.source != "simulated" or run.persona is None:
        return None
    return realism_note(run.persona.persona_id, simulator_label(run.config or {}))


def run_fidelity(run: EvaluationRun, messages: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """How faithfully the simulated student followed its turn decisions (None for a real session)."""
    persona = run_persona(run)
    if persona is None:
        return None
    found = simulator_fidelity(run_messages(run) if messages is None else messages, persona.correct_answer_probability)
    return found.as_dict() if found else None


def run_models(run: EvaluationRun) -> dict[str, dict[str, Any]]:
    """Per role (simulator, tutor, judge): the resolved provider and model, temperature and seed the run used."""
    stored = run.config.get("llm") or {}
    return {role: dict(stored[role]) for role in ("simulator", "tutor", "judge") if isinstance(stored.get(role), dict)}


def run_persona(run: EvaluationRun) -> PersonaSpec | None:
    """The run's student, with the grade the run was started with (the persona's own grade by default)."""
    if run.persona is None:
        return None
    spec = PersonaSpec.from_record(run.persona)
    grade = run.config.get("grade")
    return replace(spec, grade=int(grade)) if grade else spec


def run_topic(run: EvaluationRun) -> TopicSpec | None:
    """The topic an evaluated session carried in its state (its own context wins), else the run's topic."""
    stored = run.config.get("topic")
    if isinstance(stored, dict) and stored:
        return TopicSpec.from_dict(stored)
    return TopicSpec.from_record(run.topic) if run.topic else None


def run_config(run: EvaluationRun) -> dict[str, Any]:
    """Everything the run was started with: its columns and its settings, as config.json shows them
    (credentials inside URLs masked)."""
    return redact(
        {
            "run_id": run.run_id,
            "topic_id": run.topic.topic_id if run.topic else None,
            "persona_id": run.persona.persona_id if run.persona else None,
            "max_turns": run.max_turns,
            "seed": run.seed,
            # The final session state goes to conversation.json's session block, not the configuration.
            **{k: v for k, v in run.config.items() if k != "session_state"},
        }
    )


def run_report_context(
    run: EvaluationRun, messages: list[dict[str, Any]] | None = None, judged: Judged | None = None
) -> dict[str, Any]:
    """Everything the report writers need, from the database alone (`messages`: the run's
    conversation as `run_messages` gives it, and `judged`, its verdict's rows, when the caller has
    just read or stored them)."""
    persona, topic = run_persona(run), run_topic(run)
    messages = run_messages(run) if messages is None else messages
    coverage = run_coverage(run)
    return {
        "run": {"run_id": run.run_id, "id": str(run.id), "status": run.status, "source": run.source},
        "config": run_config(run),
        "persona": persona.as_dict() if persona else None,
        "topic": topic.as_dict() if topic else None,
        "session": {
            "session_id": str(run.source_session_id) if run.source_session_id else run.config.get("session_id"),
            "ended_by": run.config.get("ended_by") or None,
            "end_reason": run.config.get("end_reason") or None,
            "final_state": redact(run.config.get("session_state")) if run.config.get("session_state") else None,
            "coverage": {
                "answered": coverage.answered,
                "planned": coverage.planned,
                "cut_short": coverage.cut_short,
                "min_share": setting("MIN_COVERAGE"),
            }
            if coverage
            else None,
        },
        "messages": messages,
        "evaluation": run_evaluation(run, messages, judged),
        "usage": run_usage(run).as_dict(),
    }


CUT_SHORT = ("tutor_stopped", "tutor_unreachable")
"""How a conversation ends before its planned turns through no choice of the tutor's lesson."""


@dataclass(frozen=True)
class Coverage:
    """How much of its planned conversation a run was judged on."""

    answered: int
    """Student turns the tutor answered."""
    planned: int
    cut_short: bool
    """The tutor stopped answering or became unreachable before the planned turns (or its own end)."""

    @property
    def share(self) -> float:
        """1.0 for a conversation that ended as planned (max turns, or the tutor completed the session)."""
        if not self.cut_short or self.planned <= 0:
            return 1.0
        return min(1.0, self.answered / self.planned)

    def __str__(self) -> str:
        return f"{self.answered}/{self.planned} turns"


def run_coverage(run: EvaluationRun) -> Coverage | None:
    """A simulated tutor run's coverage (None for other runs: a stored session is judged whole)."""
    if run.kind != "tutor" or run.source != "simulated":
        return None
    config = run.config or {}
    answered = config.get("turns_answered")
    return Coverage(
        answered=int(answered) if isinstance(answered, int) else run.turn,
        planned=run.max_turns,
        cut_short=config.get("ended_by") in CUT_SHORT,
    )


def _group_entry(run: EvaluationRun) -> dict[str, Any]:
    coverage = run_coverage(run)
    return {
        "run_id": run.run_id,
        "persona_id": run.persona.persona_id if run.persona else None,
        "topic": run.topic.topic_id if run.topic else None,
        "seed": run.seed,
        "status": run.status,
        "repeat_index": run.repeat_index,
        "scores": run_scores(run),
        "avg_score": run.overall_score,
        "root_causes": [p.root_cause for p in run.problems.all()],
        "judge": run.judge_label,
        "judge_config": run.config.get("judge_config"),
        "max_turns": run.max_turns,
        "turns_answered": coverage.answered if coverage else None,
        "coverage": coverage.share if coverage else 1.0,
        "ended_by": run.config.get("ended_by") or None,
        "seconds": (run.completed_at - run.started_at).total_seconds() if run.completed_at and run.started_at else None,
    }


def group_runs(group: str) -> list[dict[str, Any]]:
    """Comparison input: every run of a multi-persona group with its scores and root causes."""
    if not group:
        return []
    runs = (
        runs_with_results()
        .filter(group=group)
        .prefetch_related("problems")
        .order_by("persona__persona_id", "repeat_index")
    )
    return [_group_entry(run) for run in runs]


def baseline_runs(ref: str) -> list[dict[str, Any]]:
    """A baseline for a comparison: the scored runs of a comparison group, or one tutor run, by id."""
    runs = group_runs(ref)
    if not runs:
        single = runs_with_results().prefetch_related("problems").filter(run_id=ref, kind="tutor").first()
        runs = [_group_entry(single)] if single else []
    return [r for r in runs if r["scores"]]


def group_baseline(group: str) -> dict[str, Any] | None:
    """The baseline a group was started against (its runs' config), if any."""
    configs = EvaluationRun.objects.filter(group=group).values_list("config", flat=True)
    return next((c["baseline"] for c in configs if isinstance(c, dict) and c.get("baseline")), None)


def group_gate(group: str, runs: list[dict[str, Any]] | None = None) -> Gate | None:
    """A group's runs checked against the baseline it was started with (None when it has none)."""
    baseline = group_baseline(group)
    if baseline is None:
        return None
    # a baseline recorded before its runs were kept with it: its runs as they are stored now
    older = None if baseline.get("runs") else baseline_runs(baseline["id"])
    batch = group_runs(group) if runs is None else runs
    base = [r for r in older or [] if counted(r, setting("MIN_COVERAGE"))]
    # a baseline recorded before its runs' ids were kept with them cannot be matched with labels
    ids = [r["run_id"] for r in [*batch, *(baseline.get("runs") or base)] if r.get("run_id")]
    return gate(
        batch,
        baseline,
        min_coverage=setting("MIN_COVERAGE"),
        baseline_runs=base,
        people=run_people_values(ids),  # read now: labels made after the start count
    )


@dataclass
class RunCard:
    """What a dashboard card shows for one run."""

    run: EvaluationRun
    scores: list[tuple[str, float]]
    message_count: int
    coverage: Coverage | None = None


RUN_FILTERS = ("source", "persona", "topic", "status", "date_from", "date_to")


def runs_filtered(
    runs: QuerySet[EvaluationRun] | None, filters: dict[str, str], *, kind: str = ""
) -> QuerySet[EvaluationRun]:
    """Runs (of `runs`, else all) matching the dashboard's filters (RUN_FILTERS) as the API's run list filters
    them (runs_filter): every kind unless `kind` is named; a date it cannot read is ignored."""
    return runs_filter(
        EvaluationRun.objects.all() if runs is None else runs,
        kind=kind,
        source=filters.get("source") or "",
        persona=filters.get("persona") or "",
        topic=filters.get("topic") or "",
        status=filters.get("status") or "",
        date_from=_date_or_none(filters.get("date_from")),
        date_to=_date_or_none(filters.get("date_to")),
    )


def tutor_runs_filtered(runs: QuerySet[EvaluationRun], filters: dict[str, str]) -> QuerySet[EvaluationRun]:
    """Tutor runs matching the dashboard's filters (the score charts: dimensions are the tutor judge's)."""
    return runs_filtered(runs, filters, kind="tutor")


def run_list_page(
    filters: dict[str, str], page_number: str | int | None, per_page: int = 24
) -> tuple[Page, list[RunCard]]:
    """One page of runs of every kind (as the API lists them), newest first, in four queries whatever the
    number of runs or messages."""
    runs = runs_filtered(
        EvaluationRun.objects.select_related("persona", "topic", "agent", "suite_run").order_by("-created_at"), filters
    )
    page = Paginator(runs, per_page).get_page(page_number)
    items = list(page.object_list)
    ids = [r.pk for r in items]
    scores: dict[Any, list[tuple[str, float]]] = {}
    for run_pk, dimension, score in (
        DimensionScore.objects.filter(run_id__in=ids).order_by("id").values_list("run_id", "dimension", "score")
    ):
        scores.setdefault(run_pk, []).append((dimension, score))
    counts = dict(
        RunMessage.objects.filter(run_id__in=ids).values("run_id").annotate(n=Count("id")).values_list("run_id", "n")
    )
    return page, [RunCard(r, scores.get(r.pk, []), counts.get(r.pk, 0), run_coverage(r)) for r in items]


def comparison_context(group: str) -> dict[str, Any] | None:
    """A multi-persona group's table: personas x dimensions (mean, spread), root causes, from the data. Runs of
    different judges are never averaged together: with more than one judge in the group, each persona has a row
    (and a chart series) per judge, named in it."""
    runs = group_runs(group)
    if not runs:
        return None
    data = comparison_data(runs, min_coverage=setting("MIN_COVERAGE"))
    baseline = group_baseline(group)
    judges = group_judges(runs)
    split = len(judges) > 1
    per_judge = {
        j: comparison_data(part, min_coverage=setting("MIN_COVERAGE")) for j, part in runs_by_judge(runs).items()
    }
    dimensions: list[str] = []
    for part in per_judge.values():
        for p in part["personas"].values():
            dimensions += [d for d in p["mean_scores"] if d not in dimensions]
    rows = []
    series: dict[str, dict[str, float]] = {}
    for judge, part in per_judge.items():
        for persona_id, p in part["personas"].items():
            cells = [
                (
                    p["mean_scores"].get(d),
                    p["spread"].get(d),
                    *shown_interval(p["ci"].get(d, (None, None)), p["n"].get(d, 0)),
                    p["n"].get(d, 0),
                )
                for d in dimensions
            ]
            rows.append(
                {
                    "persona_id": persona_id,
                    "judge": judge,
                    "cells": cells,
                    "avg": p["avg_score"],
                    "avg_spread": p["avg_spread"],
                    "avg_ci": shown_interval(p["avg_ci"], p["avg_n"]),
                    "avg_n": p["avg_n"],
                    "runs": p["runs"],
                }
            )
            if p["mean_scores"] or not split:
                series[judge_row_key(persona_id, judge) if split else persona_id] = p["mean_scores"]
    # a persona's rows stay together, its judges in name order (runs never judged last)
    rows.sort(key=lambda row: (row["persona_id"], row["judge"] == "", row["judge"]))
    series = dict(sorted(series.items()))
    repeats = max(len(row["runs"]) for row in rows)
    checked = group_gate(group, runs)
    return {
        "group": group,
        "dimensions": dimensions,
        "rows": rows,
        "personas": len(data["personas"]),
        "judges": judges,
        "split_by_judge": split,
        "root_causes": data["root_causes"],
        "repeats": repeats,
        "series": series,
        "baseline": {k: v for k, v in baseline.items() if k != "means"} if baseline else None,
        "gate": checked.as_dict() if checked else None,
        "realism": group_realism_of(group),
        "gate_final": not EvaluationRun.objects.filter(group=group, status__in=ACTIVE_STATUSES).exists(),
        "left_out": data["left_out"],
        "min_coverage": setting("MIN_COVERAGE"),
    }


def group_realism_of(group: str) -> list[dict[str, Any]]:
    """The unrealistic simulated students among a comparison's runs (shown beside its verdict, never changing it)."""
    runs = EvaluationRun.objects.filter(group=group, source="simulated", persona__isnull=False).select_related(
        "persona"
    )
    return group_realism([(r.persona.persona_id, simulator_label(r.config or {})) for r in runs if r.persona])


def comparison_summary(group: str) -> dict[str, Any]:
    """A group's runs with their coverage, and its gate, for the API; NotFound when no run has the group."""
    runs = group_runs(group)
    if not runs:
        raise NotFound(f"group: no comparison {group!r}")
    checked = group_gate(group, runs)
    return {
        "group": group,
        "final": all(r["status"] not in ACTIVE_STATUSES for r in runs),
        "runs": runs,
        "gate": checked.as_dict() if checked else None,
    }


def start_form_choices() -> dict[str, Any]:
    """What the dashboard's start form offers: personas, topics, tutors under test and recent sessions."""
    return {
        "personas": Persona.objects.order_by("persona_id").only("persona_id", "name"),
        "topics": Topic.objects.order_by("grade", "topic_id").only("topic_id", "name", "grade", "approved"),
        "agents": Agent.objects.exclude(kind="character").only("id", "display_name"),
        # Only sessions with something to judge: a session that never got a message has no conversation.
        "sessions": TutoringSession.objects.select_related("topic")
        .exclude(full_conversation_log=[], conversation_history=[])
        .order_by("-created_at")[:50],
        # Baselines to offer: the newest comparison groups with a scored run.
        "baselines": list(
            EvaluationRun.objects.filter(kind="tutor", overall_score__isnull=False)
            .exclude(group="")
            .values_list("group", flat=True)
            .annotate(newest=Max("created_at"))
            .order_by("-newest")[:20]
        ),
    }


def _date_or_none(value: str | None) -> date | None:
    try:
        return parse_date(value or "")
    except ValueError:  # well-formed but impossible, such as 2026-13-45
        return None


def topic_list(*, grade: int | None = None, subject: str = "", approved: bool | None = None) -> QuerySet[Topic]:
    """Topics a simulated run can teach, by grade then id; filters left as None or blank match all."""
    topics = Topic.objects.order_by("grade", "topic_id")
    if grade is not None:
        topics = topics.filter(grade=grade)
    if subject:
        topics = topics.filter(subject=subject)
    if approved is not None:
        topics = topics.filter(approved=approved)
    return topics


def unknown(field: str, noun: str, value: str, known: QuerySet) -> NotFound:
    """NotFound naming the value and the ids there are (the first 20), or saying none are loaded."""
    ids = [str(i) for i in known[:21]]
    if not ids:
        return NotFound(f"{field}: no {noun} {value!r}; none are loaded (run manage.py load_catalog)")
    listing = ", ".join(ids[:20]) + (", ..." if len(ids) > 20 else "")
    return NotFound(f"{field}: no {noun} {value!r}; the {noun}s are: {listing}")


def topic_get(topic_id: str, *, field: str = "topic") -> Topic:
    topic = Topic.objects.filter(topic_id=topic_id).first()
    if topic is None:
        raise unknown(field, "topic", topic_id, Topic.objects.order_by("topic_id").values_list("topic_id", flat=True))
    return topic


def persona_list(*, grade: int | None = None) -> QuerySet[Persona]:
    """Student personas by id; `grade` keeps those of one grade."""
    personas = Persona.objects.order_by("persona_id")
    return personas.filter(grade=grade) if grade is not None else personas


def persona_get(persona_id: str) -> Persona:
    persona_id = persona_id.removesuffix(".json")
    persona = Persona.objects.filter(persona_id=persona_id).first()
    if persona is None:
        ids = Persona.objects.order_by("persona_id").values_list("persona_id", flat=True)
        raise unknown("persona", "persona", persona_id, ids)
    return persona


def run_files(run: EvaluationRun) -> list[str]:
    """The names of the run's report files that exist (never the server's path to them)."""
    folder = Path(run.artifacts_dir) if run.artifacts_dir else None
    if folder is None or not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name in DOWNLOADABLE)


@dataclass(frozen=True)
class ScoreTrends:
    """Mean judged scores of completed tutor runs, three ways: over time, per tutor version, per persona."""

    dimensions: list[str]
    times: list[str]
    """Bucket labels, oldest first: days, or hours or minutes when the runs span less than two days."""
    over_time: dict[str, list[float | None]]
    """Per dimension, its mean in each time bucket (None where no run scored it)."""
    by_tutor: dict[str, dict[str, float]]
    """Per tutor under test ("Reference tutor", or the agent's name and model), the mean per dimension."""
    by_persona: dict[str, dict[str, float]]
    runs: int
    moments: list[datetime] = field(default_factory=list)
    """Each time bucket's start (aligned with times): the charts' time axis."""
    judges: list[str] = field(default_factory=list)
    """The judges of the runs counted; with more than one, every series is split by judge (named in it)."""


def _tutor_label(name: str | None, model: str | None) -> str:
    if not name:
        return "Reference tutor"
    return f"{name} ({model})" if model else name


def _mean_time(moments: list[datetime]) -> datetime:
    first = min(moments)
    return first + sum((m - first for m in moments), timedelta()) / len(moments)


def score_trends(filters: dict[str, str], *, max_runs: int = 2000) -> ScoreTrends:
    """The charts' data for the runs the dashboard's filters select (the newest max_runs completed ones)."""
    from statistics import fmean

    runs = tutor_runs_filtered(EvaluationRun.objects.filter(status="completed"), filters).order_by("-created_at")
    picked = runs.values("pk")[:max_runs]
    rows = list(
        DimensionScore.objects.filter(run__in=picked).values_list(
            "run_id",
            "run__created_at",
            "run__persona__persona_id",
            "run__agent__display_name",
            "run__agent__model",
            "dimension",
            "score",
            "run__judge_label",
        )
    )
    dimensions = [d for d in DIMENSIONS if any(r[5] == d for r in rows)]
    dimensions += sorted({r[5] for r in rows} - set(dimensions))
    days = {r[1].date() for r in rows}
    hours = {r[1].replace(minute=0, second=0, microsecond=0) for r in rows}
    fmt = "%Y-%m-%d" if len(days) > 1 else "%H:00" if len(hours) > 1 else "%H:%M"

    judges = sorted({r[7] or "unknown judge" for r in rows})
    split = len(judges) > 1

    def named(name: str, judge: str | None) -> str:
        # runs of different judges are never averaged together: each judge has its own series
        return f"{name} · {judge or 'unknown judge'}" if split else name

    buckets: dict[str, dict[str, list[float]]] = {}
    moments: dict[str, dict[Any, datetime]] = {}
    tutors: dict[str, dict[str, list[float]]] = {}
    personas: dict[str, dict[str, list[float]]] = {}
    for run_pk, created, persona, agent_name, agent_model, dimension, value, judge in sorted(rows, key=lambda r: r[1]):
        bucket = created.strftime(fmt)
        moments.setdefault(bucket, {})[run_pk] = created
        buckets.setdefault(bucket, {}).setdefault(named(dimension, judge), []).append(value)
        tutors.setdefault(named(_tutor_label(agent_name, agent_model), judge), {}).setdefault(dimension, []).append(
            value
        )
        personas.setdefault(named(persona or "real student", judge), {}).setdefault(dimension, []).append(value)

    def means(groups: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
        return {key: {d: round(fmean(v), 2) for d, v in dims.items()} for key, dims in groups.items()}

    times = list(buckets)
    drawn = [named(d, j) for d in dimensions for j in judges] if split else dimensions
    drawn = [n for n in drawn if any(n in buckets[t] for t in times)]
    return ScoreTrends(
        dimensions=dimensions,
        times=times,
        over_time={n: [round(fmean(buckets[t][n]), 2) if n in buckets[t] else None for t in times] for n in drawn},
        by_tutor=means(tutors),
        by_persona=dict(sorted(means(personas).items())),
        # a bucket's point sits at the mean time of its runs (runs at 12:50 and 12:58 of the 12:00 bucket: 12:54)
        moments=[_mean_time(list(moments[t].values())) for t in times],
        judges=judges,
        runs=len({r[0] for r in rows}),
    )
