"""The run kernel's reads: lookup, status, and what is active."""

import uuid
from dataclasses import asdict, dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Count, F, Prefetch, Q, QuerySet

from evaluation.errors import FieldProblem, InvalidInput, NotFound
from evaluation.models import (
    Adjudication,
    Agent,
    Annotation,
    DimensionScore,
    EvaluationRun,
    Item,
    Problem,
    Rubric,
    RunMessage,
)
from evaluation.models.runs import ACTIVE_STATUSES, RunStatus
from evaluation.providers.accounting import unpriced


def run_url_id(run: EvaluationRun) -> str:
    """What a URL names the run by: its readable id, or its UUID for an old id with a '/' in it
    (ids are slugs now, but such a run must still open; run_lookup takes either)."""
    return run.run_id if "/" not in run.run_id else str(run.pk)


def run_lookup(run_id: str, *, kind: str | None = None) -> EvaluationRun:
    """A run by readable id or UUID (of the given kind, if named); NotFound names what was asked for."""
    query = Q(run_id=run_id)
    try:
        query |= Q(pk=uuid.UUID(str(run_id)))
    except ValueError:
        pass
    runs = EvaluationRun.objects.select_related("persona", "topic", "agent").filter(query)
    run = runs.first()
    if run is None:
        raise NotFound(f"run: no run {run_id!r}")
    if kind is not None and run.kind != kind:
        raise NotFound(f"run: {run_id!r} is a {run.kind} run, not a {kind} run")
    return run


def runs_with_results() -> QuerySet[EvaluationRun]:
    """Runs with persona, topic, scores and message counts loaded in a fixed number of queries."""
    return (
        EvaluationRun.objects.select_related("persona", "topic", "agent")
        .prefetch_related(Prefetch("dimension_scores", queryset=DimensionScore.objects.order_by("id")))
        .annotate(message_count=Count("messages", distinct=True))
    )


def run_scores(run: EvaluationRun) -> dict[str, float]:
    return {s.dimension: s.score for s in run.dimension_scores.all()}


WAITING = Q(status=RunStatus.QUEUED) & ~Q(queue_action="") & ~Q(sent_attempt=F("attempt"))
"""Queued runs whose task has not been handed to the workers yet: they wait for a free slot."""

SENT = Q(status=RunStatus.QUEUED) & ~Q(queue_action="") & Q(sent_attempt=F("attempt"))
"""Queued runs whose task went to the workers but that no worker has begun yet."""

HELD = Q(status=RunStatus.QUEUED) & Q(queue_action="")
"""Queued runs that no worker will take: the process that made them (a CLI batch, `worker` says which)
runs them itself, and beats their heartbeat while it lives."""


@dataclass(frozen=True)
class SentRun:
    """A run handed to the workers (its task sent) that no worker has begun yet."""

    pk: str
    attempt: int
    action: str
    run_id: str
    kind: str


def run_people_values(run_ids: list[str], rubric: str = "tutor-session") -> dict[str, dict[str, float]]:
    """Per run (by id) and dimension, people's value of the run's conversation under the rubric's current version:
    the adjudicated value where a disagreement was settled, else the mean of the annotators' values. Runs nobody
    labelled are left out; values that are not numbers (a categorical scale) are skipped."""
    found = Rubric.objects.filter(slug=rubric).first()
    if found is None or not run_ids:
        return {}
    items = dict(
        Item.objects.filter(transcript__source="run", transcript__external_id__in=run_ids, key="").values_list(
            "pk", "transcript__external_id"
        )
    )
    current = {"rubric_version__rubric": found, "rubric_version__number": found.version, "item_id__in": list(items)}
    labels: dict[tuple[str, str], list[float]] = {}
    for item, dimension, value in Annotation.objects.filter(**current).values_list(
        "item_id", "dimension__name", "value"
    ):
        number = _number(value)
        if number is not None:
            labels.setdefault((items[item], dimension), []).append(number)
    out: dict[str, dict[str, float]] = {}
    for (run_id, dimension), values in labels.items():
        out.setdefault(run_id, {})[dimension] = sum(values) / len(values)
    for item, dimension, value in Adjudication.objects.filter(**current).values_list(
        "item_id", "dimension__name", "value"
    ):
        number = _number(value)
        if number is not None:
            out.setdefault(items[item], {})[dimension] = number
    return out


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def run_sent_not_begun(*, excluding: set[str] | frozenset[str] = frozenset()) -> SentRun | None:
    """The oldest run whose task went to the workers but that no worker has begun: what a worker that
    just ended a run begins itself (the hand-over), instead of leaving it behind busy workers."""
    sent = EvaluationRun.objects.filter(SENT).exclude(pk__in=list(excluding)).order_by("created_at", "run_id")
    row = sent.values_list("pk", "attempt", "queue_action", "run_id", "kind").first()
    return SentRun(str(row[0]), *row[1:]) if row is not None else None


def run_status_counts(pks: list[Any]) -> dict[str, int]:
    """How many of these runs are in each status."""
    rows = EvaluationRun.objects.filter(pk__in=pks).values_list("status").annotate(n=Count("pk"))
    return dict(rows)


def active_runs(kind: str | None = None) -> QuerySet[EvaluationRun]:
    runs = EvaluationRun.objects.filter(status__in=ACTIVE_STATUSES)
    return runs.filter(kind=kind) if kind else runs


def run_status(run: EvaluationRun) -> dict[str, Any]:
    """Spec 001's status shape for one run: the stage, plus the lifecycle status and progress."""
    return {
        "status": run.stage,
        "run_status": run.status,
        "run_id": run.run_id,
        "kind": run.kind,
        "attempt": run.attempt,
        "detail": run.detail,
        "turn": run.turn,
        "max_turns": run.max_turns,
        "error": run.error or None,
    }


def runs_by_ids(run_ids: list[str]) -> list[dict[str, Any]]:
    """Statuses of the named runs (for the dashboard's polling), in one query."""
    return [run_status(r) for r in EvaluationRun.objects.filter(run_id__in=run_ids[:200])]


def runs_filter(
    runs: QuerySet[EvaluationRun],
    *,
    kind: str = "",
    source: str = "",
    persona: str = "",
    topic: str = "",
    agent: str = "",
    status: str = "",
    group: str = "",
    date_from: date | None = None,
    date_to: date | None = None,
) -> QuerySet[EvaluationRun]:
    """The runs that match every filter given; blank filters match all. The dashboard and the API share it.

    Dates are whole days (UTC) and inclusive; persona, topic and agent are their readable ids.
    """
    lookups: dict[str, Any] = {
        "kind": kind,
        "source": source,
        "persona__persona_id": persona,
        "topic__topic_id": topic,
        "agent_id": agent,
        "status": status,
        "group": group,
        "created_at__date__gte": date_from,
        "created_at__date__lte": date_to,
    }
    return runs.filter(**{lookup: value for lookup, value in lookups.items() if value not in ("", None)})


def run_list(**filters: Any) -> QuerySet[EvaluationRun]:
    """Runs of every kind with their results loaded, newest first, filtered as runs_filter does."""
    return runs_filter(runs_with_results().order_by("-created_at", "run_id"), **filters)


@dataclass(frozen=True)
class RunSummary:
    """One run as the run list shows it (spec 001's run-list entry), read without building the model."""

    run_id: str
    id: uuid.UUID
    kind: str
    timestamp: datetime
    completed_at: datetime | None
    status: str
    stage: str
    attempt: int
    topic_id: str | None
    persona_id: str | None
    agent_id: str | None
    message_count: int
    avg_score: float | None
    scores: dict[str, float]
    """dimension -> score, in the order the judge gave them."""
    source: str
    source_session_id: uuid.UUID | None
    group: str
    repeat_index: int


_SUMMARY_COLUMNS = {
    "run_id": "run_id",
    "id": "id",
    "kind": "kind",
    "timestamp": "created_at",
    "completed_at": "completed_at",
    "status": "status",
    "stage": "stage",
    "attempt": "attempt",
    "topic_id": "topic__topic_id",
    "persona_id": "persona__persona_id",
    "agent_id": "agent_id",
    "avg_score": "overall_score",
    "source": "source",
    "source_session_id": "source_session_id",
    "group": "group",
    "repeat_index": "repeat_index",
}


def run_summary_rows(**filters: Any) -> QuerySet[EvaluationRun, dict[str, Any]]:
    """The run list's rows as run_list orders and filters them: the summary's own columns only, one query
    per page (no model instances, no JSON columns); run_summaries completes a page of them."""
    runs = runs_filter(EvaluationRun.objects.order_by("-created_at", "run_id"), **filters)
    return runs.values(*_SUMMARY_COLUMNS.values())


def run_summaries(rows: list[dict[str, Any]]) -> list[RunSummary]:
    """A page of run_summary_rows with each run's message count and scores: two queries for the whole page."""
    pks = [row["id"] for row in rows]
    counts = dict(
        RunMessage.objects.filter(run_id__in=pks)
        .order_by()
        .values("run_id")
        .annotate(n=Count("id"))
        .values_list("run_id", "n")
    )
    scores: dict[uuid.UUID, dict[str, float]] = {pk: {} for pk in pks}
    for run_pk, dimension, score in (
        DimensionScore.objects.filter(run_id__in=pks).order_by("id").values_list("run_id", "dimension", "score")
    ):
        scores[run_pk][dimension] = score
    return [
        RunSummary(
            **{name: row[column] for name, column in _SUMMARY_COLUMNS.items()},
            message_count=counts.get(row["id"], 0),
            scores=scores[row["id"]],
        )
        for row in rows
    ]


@dataclass(frozen=True)
class CurrentRun:
    """What the polling endpoint reports: one run (or none) and how many runs are active."""

    run: EvaluationRun | None
    active_runs: int


def run_current(*, run_id: str | None = None, kind: str = "") -> CurrentRun:
    """The named run, else the newest active run, else the newest run (of `kind` when named, and then
    counting only that kind's active runs); NotFound for an unknown id."""
    active = active_runs(kind or None).order_by("-created_at")
    if run_id:
        return CurrentRun(run=run_lookup(run_id, kind=kind or None), active_runs=active.count())
    newest = EvaluationRun.objects.filter(kind=kind) if kind else EvaluationRun.objects.all()
    run = active.first() or newest.order_by("-created_at").first()
    return CurrentRun(run=run, active_runs=active.count())


@dataclass(frozen=True)
class RunExport:
    """What an export holds: the runs (scores and problems loaded), how many, and their score dimensions."""

    runs: QuerySet[EvaluationRun]
    count: int
    dimensions: list[str]


def run_export(*, max_rows: int, limit: int | None = None, **filters: Any) -> RunExport:
    """The runs runs_filter selects (the newest `limit` of them when given), for an export of at most
    max_rows runs.

    Beyond max_rows nothing is exported: InvalidInput says how many matched and how to narrow them.
    """
    problems = Prefetch("problems", queryset=Problem.objects.order_by("rank"))
    matching = runs_filter(EvaluationRun.objects.order_by("-created_at", "run_id"), **filters).values("pk")
    runs = run_list(**filters)
    if limit is not None:
        matching = EvaluationRun.objects.filter(pk__in=matching[:limit]).values("pk")
        runs = run_list().filter(pk__in=matching)
    runs = runs.prefetch_related(problems)
    count = runs.count()
    if count > max_rows:
        raise InvalidInput(
            [
                FieldProblem(
                    "",
                    f"{count} runs match and an export holds at most {max_rows}; "
                    "narrow it with filters such as date_from, date_to, kind or status, or set limit",
                )
            ]
        )
    names = DimensionScore.objects.filter(run__in=matching).order_by("id").values_list("dimension", flat=True)
    return RunExport(runs=runs, count=count, dimensions=list(dict.fromkeys(names)))


REFERENCE_TUTOR_ID = "reference"


def reference_tutor() -> Agent:
    """The built-in reference tutor, which no row stores: what a tutor run with no target talks to,
    over the session protocol, through this install's own protocol server. An agent stored under
    its id takes its place."""
    return Agent(
        id=REFERENCE_TUTOR_ID,
        display_name="Reference tutor (built in)",
        kind=Agent.Kind.REFERENCE,
        active=True,
    )


DEGRADED_TUTOR_ID = "degraded-tutor"


def degraded_tutor() -> Agent:
    """The built-in degraded tutor: the reference tutor with the faults of tutoring.tutor.FAULTS (it gives the
    answer away and ignores the student's last message), a known weaker tutor to measure a gate's power
    against. Stored on first use (a run names its agent); no judge knows of it."""
    return Agent(
        id=DEGRADED_TUTOR_ID,
        display_name="Degraded tutor (built in: the reference tutor with faults)",
        kind=Agent.Kind.REFERENCE,
        active=True,
        extra={"faults": ["gives_answer_away", "ignores_last_message"]},
    )


def builtin_agent(agent_id: str) -> Agent | None:
    """A built-in tutor no row stores yet, by id (the degraded tutor), or None."""
    return degraded_tutor() if agent_id == DEGRADED_TUTOR_ID else None


def target_is_reference_tutor(agent_id: str) -> bool:
    """Whether a run's target names the built-in reference tutor rather than a stored agent."""
    return agent_id == REFERENCE_TUTOR_ID and not Agent.objects.filter(pk=agent_id).exists()


def agent_list(*, kind: str = "", active: bool | None = None) -> list[Agent]:
    """Agents a run can target, by id: tutors under test (the built-in reference tutor among them)
    and character agents.

    `protocol` names every tutor reached over the session protocol, so it holds the reference tutor
    (kind `reference`, served by this install's own protocol server) as well."""
    agents = Agent.objects.order_by("id")
    kinds = [kind] if kind else []
    if kind == Agent.Kind.PROTOCOL:
        kinds.append(Agent.Kind.REFERENCE)
    if kinds:
        agents = agents.filter(kind__in=kinds)
    if active is not None:
        agents = agents.filter(active=active)
    found = list(agents)
    builtin = reference_tutor()
    if (not kinds or builtin.kind in kinds) and active is not False and target_is_reference_tutor(builtin.id):
        found.append(builtin)
    degraded = degraded_tutor()
    if (not kinds or degraded.kind in kinds) and active is not False and not any(a.id == degraded.id for a in found):
        found.append(degraded)
    found.sort(key=lambda agent: agent.id)
    return found


def agent_get(agent_id: str) -> Agent:
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None and agent_id == REFERENCE_TUTOR_ID:
        return reference_tutor()
    if agent is None:
        raise NotFound(f"agent: no agent {agent_id!r}")
    return agent


@dataclass(frozen=True)
class ProblemTrends:
    """Judges' problems by root cause: per week (the dashboard's chart) and per tutor (agent) under test."""

    weeks: list[str]
    """ISO weeks, oldest first: "2026-W47"."""
    by_week: dict[str, list[int]]
    """root cause -> problems found in runs created that week (aligned with weeks)."""
    tutors: list[str]
    by_tutor: dict[str, dict[str, int]]
    """tutor version ("name (model)", or "Reference tutor") -> root cause -> problems."""
    runs: int
    """Completed tutor runs counted."""


def problem_trends(*, weeks: int = 12, within: QuerySet[EvaluationRun] | None = None) -> ProblemTrends:
    """Problems of completed tutor runs of the last `weeks` weeks, counted by root cause; only the runs
    `within` selects (the list's filters) when given."""
    from datetime import timedelta

    from django.db.models.functions import TruncWeek
    from django.utils import timezone

    since = timezone.now() - timedelta(weeks=weeks)
    counted = EvaluationRun.objects.filter(kind="tutor", status="completed", created_at__gte=since)
    if within is not None:
        counted = counted.filter(pk__in=within.values("pk"))
    problems = Problem.objects.filter(run__in=counted)
    week_rows = (
        problems.annotate(week=TruncWeek("run__created_at")).values("week", "root_cause").annotate(n=Count("id"))
    )
    labels = sorted({r["week"].date().isocalendar()[:2] for r in week_rows})
    names = [f"{y}-W{w:02d}" for y, w in labels]
    by_week: dict[str, list[int]] = {}
    for row in week_rows:
        cause = by_week.setdefault(row["root_cause"], [0] * len(labels))
        cause[labels.index(row["week"].date().isocalendar()[:2])] += row["n"]
    by_tutor: dict[str, dict[str, int]] = {}
    rows = problems.values("run__agent__display_name", "run__agent__model", "root_cause").annotate(n=Count("id"))
    for tutor_row in rows:
        name, model = tutor_row["run__agent__display_name"], tutor_row["run__agent__model"]
        # labelled as the score charts label a tutor version
        tutor = (f"{name} ({model})" if model else name) if name else "Reference tutor"
        by_tutor.setdefault(tutor, {})[tutor_row["root_cause"]] = tutor_row["n"]
    runs = counted.count()
    return ProblemTrends(names, dict(sorted(by_week.items())), sorted(by_tutor), by_tutor, runs)


@dataclass(frozen=True)
class RoleUsage:
    """One role's share of a run's usage (cached-read and cache-write tokens are parts of input_tokens)."""

    role: str
    calls: int
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    thinking_tokens: int


@dataclass(frozen=True)
class RunUsage:
    """A run's recorded usage as every page shows it: the meter's totals, and whether any LLM was called."""

    calls: int
    input_tokens: int
    output_tokens: int
    thinking_tokens: int
    cost_usd: float
    offline_calls: int
    offline: bool
    """Every call went to the rule-based offline provider: its token counts are estimates of the text's
    size, not an LLM's bill."""
    cached_input_tokens: int = 0
    """Of input_tokens, those read from the vendor's prompt cache."""
    cache_write_tokens: int = 0
    """Of input_tokens, those written to the vendor's prompt cache."""
    by_role: tuple[RoleUsage, ...] = ()
    unpriced: tuple[str, ...] = ()
    """Models called that the price table does not price: cost_usd leaves their calls out (it is not free)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the report files' usage)."""
        return {**asdict(self), "by_role": [asdict(r) for r in self.by_role], "unpriced": list(self.unpriced)}


def _unpriced(run: EvaluationRun, usage: dict[str, Any]) -> tuple[str, ...]:
    """The meter's record of unpriced models, and those the run's roles name that have no price."""
    found = {str(m) for m in usage.get("unpriced") or ()}
    roles = usage.get("by_role") or {}
    for role, record in ((run.config or {}).get("llm") or {}).items():
        if isinstance(record, dict) and (roles.get(role) or {}).get("calls"):
            model, provider = str(record.get("model") or ""), str(record.get("provider") or "")
            if unpriced(model, provider):
                found.add(model)
    return tuple(sorted(found))


def run_usage(run: EvaluationRun) -> RunUsage:
    """The run's usage from its recorded meter (token_usage, cost_usd); runs stored before providers were
    counted are offline when they were started with the offline provider."""
    usage = run.token_usage or {}
    providers = usage.get("by_provider") or {}
    offline = set(providers) == {"offline"} if providers else (run.config or {}).get("provider") == "offline"
    calls = int(usage.get("calls") or 0)

    def count(d: dict[str, Any], name: str) -> int:
        return int(d.get(name) or 0)

    by_role = tuple(
        RoleUsage(
            role=str(role),
            **{
                name: count(d, name)
                for name in (
                    "calls",
                    "input_tokens",
                    "cached_input_tokens",
                    "cache_write_tokens",
                    "output_tokens",
                    "thinking_tokens",
                )
            },
        )
        for role, d in sorted((usage.get("by_role") or {}).items())
        if isinstance(d, dict)
    )
    return RunUsage(
        calls=calls,
        input_tokens=count(usage, "input_tokens"),
        output_tokens=count(usage, "output_tokens"),
        thinking_tokens=count(usage, "thinking_tokens"),
        cost_usd=float(run.cost_usd or 0.0),
        offline_calls=calls if offline and not providers else int(providers.get("offline") or 0),
        offline=offline,
        cached_input_tokens=count(usage, "cached_input_tokens"),
        cache_write_tokens=count(usage, "cache_write_tokens"),
        by_role=by_role,
        unpriced=() if offline else _unpriced(run, usage),
    )
