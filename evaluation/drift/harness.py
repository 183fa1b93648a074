"""The regression harness (spec 002): evaluate agents, compare each dimension and proposition with
its golden baseline, and report as Markdown and JUnit XML, naming the judge that scored.

Modes: live (the configured judge), mock-judge (recorded judge calls replayed where the request
matches, the offline rule-based judge where none does: no LLM, no network, deterministic),
synthetic (generate a conversation, then evaluate it).

A regression is a drop of more than the threshold (1.0). With k repeats (k >= 2) and the
"interval" rule it must also be beyond the noise: the bootstrap 95% confidence interval of the k
scores must lie wholly below the baseline. The "fixed" rule is the drop alone.
"""

import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from xml.etree import ElementTree as ET

import numpy as np
from django.utils import timezone

from evaluation.drift.baselines import Baseline, JudgeConfig, read_baseline, write_baseline
from evaluation.drift.characters import synthesize_conversation
from evaluation.drift.engine import PROMPT_VERSION
from evaluation.drift.execution import drift_evaluate
from evaluation.drift.ingest import messages_ingest, parse_records
from evaluation.drift.scorers import DIMENSIONS
from evaluation.models import Agent, AgentMessage, CorrectionLog, EvaluationRun, PropositionScore
from evaluation.providers import ProviderSpec, get_llm
from evaluation.runs.selectors import run_scores

# scipy is imported where it is used: it takes longer to import than the rest of the app.

REGRESSION_DROP = 1.0
MODES = ("live", "mock-judge", "synthetic")
RULES = ("interval", "fixed")
OFFLINE_NOTE = "the offline rule-based judge: no LLM"


def bootstrap_ci(samples: list[float]) -> tuple[float, float] | None:
    """The bootstrap 95% confidence interval of the mean (scipy, percentile method, fixed seed);
    None with fewer than two samples."""
    from scipy import stats

    if len(samples) < 2:
        return None
    if max(samples) == min(samples):
        return (samples[0], samples[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.bootstrap(
            (np.asarray(samples),), np.mean, confidence_level=0.95, n_resamples=2000, method="percentile", rng=0
        )
    return (round(float(result.confidence_interval.low), 3), round(float(result.confidence_interval.high), 3))


@dataclass
class Row:
    agent: str
    dimension: str
    baseline: float | None
    samples: list[float]
    """This run's score on each repeat ([] when unscored)."""
    proposition: str = ""
    """Empty for a dimension row."""
    judged_by: str = ""
    rule: str = "fixed"
    threshold: float = REGRESSION_DROP

    @property
    def name(self) -> str:
        return f"{self.dimension}/{self.proposition}" if self.proposition else self.dimension

    @property
    def score(self) -> float | None:
        return round(fmean(self.samples), 3) if self.samples else None

    @property
    def ci(self) -> tuple[float, float] | None:
        return bootstrap_ci(self.samples)

    @property
    def delta(self) -> float | None:
        return None if self.baseline is None or self.score is None else round(self.score - self.baseline, 3)

    @property
    def regression(self) -> bool:
        """A drop of more than the threshold (beyond the interval under the interval rule), or no
        score at all where a baseline expects one."""
        if self.baseline is not None and self.score is None:
            return True
        if self.delta is None or self.delta >= -self.threshold:
            return False
        ci = self.ci
        return self.rule == "fixed" or ci is None or ci[1] < (self.baseline or 0)


@dataclass
class Report:
    mode: str
    judge: str = ""
    """Who judged, in words (provider/model)."""
    rule: str = "fixed"
    repeats: int = 1
    threshold: float = REGRESSION_DROP
    rows: list[Row] = field(default_factory=list)
    runs: list[EvaluationRun] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.regression]

    @property
    def rule_text(self) -> str:
        if self.rule == "interval" and self.repeats >= 2:
            return (
                f"a drop of more than {self.threshold:.1f} whose bootstrap 95% CI over {self.repeats} repeats "
                "lies below the baseline"
            )
        note = " (one repeat: no interval, so the fixed rule)" if self.rule == "interval" else ""
        return f"a drop of more than {self.threshold:.1f} below the baseline{note}"


def ensure_cast_messages(cast_file: Path) -> int:
    """Load the cast's shipped messages (source 'cast') for every known agent that has none yet.

    All of them, not only the agents under test: convergence reads the whole channel."""
    if not cast_file.is_file():
        return 0
    records = [(w, r) for w, r in parse_records(cast_file.read_text(encoding="utf-8")) if isinstance(r, dict)]
    known = set(Agent.objects.filter(pk__in={r.get("agent") for _, r in records}).values_list("pk", flat=True))
    loaded = set(AgentMessage.objects.filter(source="cast").values_list("agent_id", flat=True).distinct())
    wanted = [(w, r) for w, r in records if r.get("agent") in known - loaded]
    return len(messages_ingest(wanted, source="cast")) if wanted else 0


def judge_words(config: JudgeConfig) -> str:
    return f"{config.name} ({OFFLINE_NOTE})" if config.provider == "offline" else config.name


def run_judge(run: EvaluationRun) -> JudgeConfig:
    """The judge configuration a run was scored by (the judge prompt is this code's)."""
    return JudgeConfig.from_label(run.judge_label, PROMPT_VERSION)


def proposition_scores(run: EvaluationRun) -> dict[tuple[str, str], float]:
    """(dimension, proposition id) -> its score in the run (unscored ones left out)."""
    return {
        (p.dimension, p.proposition_id): p.score
        for p in PropositionScore.objects.filter(evaluation_run=run, score__isnull=False)
        if p.score is not None
    }


def _proposition_key(key: str, dimensions: list[str], found: set[tuple[str, str]]) -> tuple[str, str]:
    """A baseline's "dimension/id" key, or a bare id (flat files) placed in the first dimension that has it."""
    dimension, _, pid = key.partition("/")
    if pid and dimension in dimensions:
        return dimension, pid
    return next(((d, key) for d in dimensions if (d, key) in found), ("?", key))


def baseline_from_runs(folder: Path, runs: list[EvaluationRun], *, judge: JudgeConfig) -> Path:
    """Write the agent's baseline from one or more completed runs (their mean; each repeat kept)."""
    per_dimension: dict[str, list[float]] = {}
    per_proposition: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        for dimension, score in run_scores(run).items():
            per_dimension.setdefault(dimension, []).append(score)
        for key, score in proposition_scores(run).items():
            per_proposition.setdefault(key, []).append(score)
    first = runs[0]
    order = {d: i for i, d in enumerate(first.drift.dimensions)}
    nested: dict[str, dict[str, float]] = {}
    for (dimension, pid), values in sorted(per_proposition.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        nested.setdefault(dimension, {})[pid] = round(fmean(values), 3)
    return write_baseline(
        folder,
        agent_id=first.agent_id or "",
        dimensions={d: round(fmean(v), 3) for d, v in per_dimension.items()},
        proposition_scores=nested,
        judge=judge,
        mode="offline" if judge.provider == "offline" else "live",
        captured_at=timezone.now().isoformat(),
        sample_size=first.drift.messages_judged,
        samples=per_dimension,
    )


def replay_judge(folder: Path, baseline: Baseline) -> ProviderSpec:
    model = baseline.judge.model if baseline.judge and baseline.judge.model else "offline-rules-v1"
    return ProviderSpec("replay", model, options={"dir": str(folder / "recordings")})


def judge_check(baselines: dict[str, Baseline | None], judge: JudgeConfig, force: bool) -> list[str]:
    """Refuse baselines scored by another judge configuration (unless forced: then a note each)."""
    other = {a: b for a, b in baselines.items() if b is not None and b.judge is not None and not b.judge.same_as(judge)}
    if not other:
        return []
    lines = [f"{a}: the baseline was scored by {b.judge.label if b.judge else '?'}" for a, b in sorted(other.items())]
    if not force:
        raise ValueError(
            f"judge: this run's judge is {judge.label}, but "
            + "; ".join(lines)
            + ". Scores from another judge configuration are not comparable: record new baselines with "
            "drift_baseline, or pass --force to compare anyway."
        )
    return [f"{line} (compared anyway: --force)" for line in lines]


def _link_corrections(agent: Agent, run: EvaluationRun, before: set[uuid.UUID]) -> None:
    """Correction logs written while this agent's messages were generated belong to the run that scores them."""
    CorrectionLog.objects.filter(agent=agent, run__isnull=True).exclude(pk__in=before).update(run=run)


def harness_run(
    *,
    agent_ids: list[str],
    mode: str,
    baselines_dir: Path,
    cast_file: Path,
    judge: str | None = None,
    rounds: int = 4,
    repeats: int = 1,
    rule: str = "interval",
    force: bool = False,
    threshold: float = REGRESSION_DROP,
) -> Report:
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    if rule not in RULES:
        raise ValueError(f"rule: {rule!r} is not one of {', '.join(RULES)}")
    if repeats < 1:
        raise ValueError(f"repeats: {repeats} must be 1 or more")
    agents = sorted(Agent.objects.filter(pk__in=agent_ids), key=lambda a: a.pk)
    unknown = sorted(set(agent_ids) - {a.pk for a in agents})
    if unknown:
        raise ValueError(f"agents: no agent {', '.join(map(repr, unknown))}")
    baselines = {a.pk: read_baseline(baselines_dir, a.pk) for a in agents}
    report = Report(mode=mode, rule=rule, repeats=repeats, threshold=threshold)
    notes: list[str] = []
    if mode == "mock-judge":
        missing = [a for a, b in baselines.items() if b is None]
        if missing:
            raise ValueError(
                f"mock-judge: no baseline for {', '.join(missing)} in {baselines_dir} (record one with drift_baseline)"
            )
        judges = sorted({(b.judge.name if b and b.judge else "offline-rules-v1") for b in baselines.values()})
        report.judge = (
            f"mock-judge: recorded calls of {', '.join(judges)} replayed; "
            f"offline/offline-rules-v1 ({OFFLINE_NOTE}) where no recording matches"
        )
    else:
        config = JudgeConfig.from_label(get_llm("proposition_judge", override=judge).label, PROMPT_VERSION)
        notes = judge_check(baselines, config, force)
        report.judge = judge_words(config)
    report.judge += "".join(f"\n{n}" for n in notes)

    source: str | None = None
    unlinked: dict[str, set[uuid.UUID]] = {}
    if mode == "mock-judge":
        ensure_cast_messages(cast_file)
        source = "cast"
    elif mode == "synthetic":
        unlinked = {
            a.pk: set(CorrectionLog.objects.filter(agent=a, run__isnull=True).values_list("pk", flat=True))
            for a in agents
        }
        synthesize_conversation(agents, f"synthetic-{timezone.now():%Y%m%d%H%M%S}", rounds=rounds, provider=judge)
        source = "synthetic"
    for agent in agents:
        baseline = baselines[agent.pk]
        runs: list[EvaluationRun] = []
        for _ in range(repeats):
            spec = replay_judge(baselines_dir, baseline) if mode == "mock-judge" and baseline else judge
            run = drift_evaluate(agent=agent, judge=spec, source=source)
            if run.status != "completed":
                raise RuntimeError(f"{agent.pk}: the evaluation failed: {run.error}")
            runs.append(run)
        if mode == "synthetic":
            _link_corrections(agent, runs[0], unlinked[agent.pk])
        report.runs += runs
        judged_by = runs[0].drift.judged_by or {}
        scores = [run_scores(r) for r in runs]
        dimensions = list(runs[0].drift.dimensions)
        dimensions += sorted(set(baseline.dimensions if baseline else {}) - set(dimensions))
        for dimension in dimensions:
            report.rows.append(
                Row(
                    agent.pk,
                    dimension,
                    baseline.dimensions.get(dimension) if baseline else None,
                    [s[dimension] for s in scores if dimension in s],
                    judged_by=judged_by.get(dimension, ""),
                    rule=rule,
                    threshold=threshold,
                )
            )
        if baseline and baseline.proposition_scores:
            per_run = [proposition_scores(r) for r in runs]
            found = set(
                PropositionScore.objects.filter(evaluation_run=runs[0]).values_list("dimension", "proposition_id")
            )
            for key, expected in baseline.proposition_scores.items():
                where = _proposition_key(key, dimensions, found)
                report.rows.append(
                    Row(
                        agent.pk,
                        where[0],
                        expected,
                        [s[where] for s in per_run if where in s],
                        proposition=where[1],
                        judged_by=judged_by.get(where[0], ""),
                        rule=rule,
                        threshold=threshold,
                    )
                )
    return report


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _status(r: Row) -> str:
    if r.regression:
        return "no score" if r.score is None else "regression"
    if r.baseline is None:
        return "no baseline" if r.score is not None else "unscored"
    if r.score is None:
        return "unscored"
    if r.delta is not None and r.delta < -r.threshold:
        return "ok (within the noise)"
    return "ok"


def markdown(report: Report) -> str:
    def table(rows: list[Row], first: str) -> list[str]:
        lines = [
            f"| agent | {first} | judged by | baseline | score | 95% CI | delta | |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            ci = "-" if r.ci is None else f"{r.ci[0]:.2f}–{r.ci[1]:.2f}"
            delta = "-" if r.delta is None else f"{r.delta:+.2f}"
            lines.append(
                f"| {r.agent} | {r.name} | {r.judged_by or '-'} | {_fmt(r.baseline)} | {_fmt(r.score)} | {ci} "
                f"| {delta} | {_status(r)} |"
            )
        return lines

    dims = [r for r in report.rows if not r.proposition]
    props = [r for r in report.rows if r.proposition]
    lines = [
        f"### Persona drift ({report.mode})",
        "",
        "Judge: " + report.judge.replace("\n", "  \n"),
        "",
        f"Repeats: {report.repeats}. A regression is {report.rule_text}.",
        "",
        *table(dims, "dimension"),
    ]
    if props:
        lines += ["", "#### Propositions", "", *table(props, "proposition")]
    n = len(report.regressions)
    lines += ["", f"{n} regression(s)." if n else "No regressions."]
    return "\n".join(lines) + "\n"


def junit(report: Report) -> str:
    suite = ET.Element(
        "testsuite", name="persona-drift", tests=str(len(report.rows)), failures=str(len(report.regressions))
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (("mode", report.mode), ("judge", report.judge), ("rule", report.rule_text)):
        ET.SubElement(props, "property", name=name, value=value)
    for r in report.rows:
        case = ET.SubElement(suite, "testcase", classname=f"drift.{r.agent}", name=r.name)
        if r.regression:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{r.name} fell {-(r.delta or 0):.2f} below its baseline"
                if r.score is not None
                else f"{r.name} has no score",
            )
            failure.text = f"baseline {r.baseline}, score {r.score}, 95% CI {r.ci}, judged by {r.judged_by}"
        elif r.score is None:
            ET.SubElement(case, "skipped", message="no score")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


__all__ = ["DIMENSIONS", "baseline_from_runs", "harness_run", "junit", "markdown", "run_judge"]
