"""The regression harness (spec 002): evaluate agents, compare each dimension and proposition with
its golden baseline, and report as Markdown and JUnit XML, naming the judge that scored.

Modes: live (the configured judge), mock-judge (recorded judge calls replayed where the request
matches, the offline rule-based judge where none does: no LLM, no network, deterministic),
synthetic (generate a conversation, then evaluate it).

A regression is a drop of more than the threshold (1.0). Under the "interval" rule it must also be
beyond the noise. Where the baseline kept its repeats (drift_baseline from 2 or more runs), the noise
model is the tutoring gate's (evaluation.runs.noise): the baseline's and this run's repeats give the
run-to-run spread (never below the judge's rounding; the agent is one cluster, so this is Student's
two-sample t), and the change is tested one-sided, each dimension at alpha / D over the agent's D dimensions compared this way (Bonferroni, so
the agent's false-alarm rate over its dimensions is at most alpha); with one repeat now this is a
prediction interval from the baseline's spread. Otherwise (a baseline of one run, and every
proposition row, whose baseline keeps means only) the bootstrap 95% confidence interval of the k >= 2
scores must lie wholly below the baseline, and with one repeat and no baseline repeats the rule is
the fixed one. The "fixed" rule is the drop alone.

Every mode compares a baseline only when it recorded this run's setup (judge provider, model and
prompt version, the version of each dimension's propositions, the window); any difference refuses
the run before anything is judged, unless forced, and then every report says so. Mock-judge's
setup is the offline rule-based judge's, which scores whatever the recordings do not match. An
agent with no baseline is evaluated and reported as "no baseline", never as a pass; a run in
which nothing at all could be compared fails, as does a failed or incomplete evaluation.
"""

import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from xml.etree import ElementTree as ET

import numpy as np
from django.utils import timezone

from evaluation.drift.baselines import Baseline, JudgeConfig, Setup, read_baseline, setup_mismatches, write_baseline
from evaluation.drift.characters import synthesize_conversation
from evaluation.drift.engine import PROMPT_VERSION
from evaluation.drift.execution import drift_evaluate, known_dimensions, rubric_versions
from evaluation.drift.ingest import messages_ingest, parse_records
from evaluation.drift.scorers import DIMENSIONS
from evaluation.models import Agent, AgentMessage, CorrectionLog, EvaluationRun, PropositionScore
from evaluation.providers import ProviderSpec, get_llm
from evaluation.runs import noise
from evaluation.runs.selectors import run_scores

# scipy is imported where it is used: it takes longer to import than the rest of the app.

REGRESSION_DROP = 1.0
MODES = ("live", "mock-judge", "synthetic")
RULES = ("interval", "fixed")
OFFLINE_NOTE = "the offline rule-based judge: no LLM"
MAX_MESSAGES = 20
"""The harness judges each agent's most recent 20 messages (drift's counterpart of max turns)."""
FORCED = "forced comparison"


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
    repeats: int = 1
    """How many evaluations should have scored it."""
    forced: bool = False
    """Compared with a baseline of another setup (--force)."""
    baseline_samples: list[float] = field(default_factory=list)
    """The baseline's own repeats of this row (dimension rows of a baseline made from 2 or more runs)."""
    family: int = 1
    """How many of the agent's rows are tested against their baseline's repeats together (alpha / family)."""

    @property
    def name(self) -> str:
        return f"{self.dimension}/{self.proposition}" if self.proposition else self.dimension

    # The verdict logic lives in plain functions below (mutation testing does not reach properties).
    @property
    def score(self) -> float | None:
        return row_score(self)

    @property
    def ci(self) -> tuple[float, float] | None:
        return bootstrap_ci(self.samples)

    @property
    def delta(self) -> float | None:
        return row_delta(self)

    @property
    def regression(self) -> bool:
        return row_regression(self)

    @property
    def incomplete(self) -> bool:
        return row_incomplete(self)


def row_score(r: Row) -> float | None:
    """The mean over the repeats that scored it."""
    return round(fmean(r.samples), 3) if r.samples else None


def row_delta(r: Row) -> float | None:
    score = row_score(r)
    return None if r.baseline is None or score is None else round(score - r.baseline, 3)


def row_regression(r: Row) -> bool:
    """A drop of more than the threshold (beyond the interval under the interval rule), or no score at
    all where a baseline expects one."""
    if r.baseline is None:
        return False
    delta = row_delta(r)
    if delta is None:
        return True
    if delta >= -r.threshold:
        return False
    if r.rule == "fixed":
        return True
    test = row_test(r)
    if test is not None:
        return test.p_value is not None and test.p_value <= noise.ALPHA / r.family
    ci = bootstrap_ci(r.samples)
    return ci is None or ci[1] < r.baseline


def row_test(r: Row) -> noise.DimensionTest | None:
    """The change against the baseline's repeats (the gates' noise model), when the baseline kept 2 or more."""
    if len(r.baseline_samples) < 2 or not r.samples:
        return None
    base = [noise.Observation(r.agent, v) for v in r.baseline_samples]
    return noise.dimension_test(r.name, base, [noise.Observation(r.agent, v) for v in r.samples], family=r.family)


def row_incomplete(r: Row) -> bool:
    """Scored by some repeats but not all: not a whole measurement."""
    return 0 < len(r.samples) < r.repeats


@dataclass(frozen=True)
class AgentVerdict:
    """What the harness concluded for one agent."""

    agent: str
    verdict: str
    """ok, regression, no baseline, evaluation failed, incomplete, empty baseline (each + forced comparison)."""
    reason: str = ""
    failed: bool = False
    """Whether this verdict fails the harness."""
    compared: bool = False
    """Whether anything of the agent's was compared with a baseline."""


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
    agents: list[str] = field(default_factory=list)
    baselines_dir: str = ""
    without_baseline: list[str] = field(default_factory=list)
    empty_baseline: list[str] = field(default_factory=list)
    """Agents whose baseline file holds no score at all."""
    failed: dict[str, str] = field(default_factory=dict)
    """Agent -> why its evaluation failed."""
    forced: dict[str, list[str]] = field(default_factory=dict)
    """Agent -> how its baseline's setup differs from this run's (compared anyway: --force)."""
    max_messages: int = MAX_MESSAGES

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.regression]

    @property
    def incomplete(self) -> list[Row]:
        return [r for r in self.rows if r.incomplete and not r.regression]

    @property
    def verdicts(self) -> list[AgentVerdict]:
        return report_verdicts(self)

    @property
    def problems(self) -> list[str]:
        """Why the harness fails ([] when it passes)."""
        return report_problems(self)

    @property
    def summary(self) -> str:
        """The report's last line."""
        return report_summary(self)

    @property
    def rule_text(self) -> str:
        return rule_text(self.rule, self.repeats, self.threshold, any(r.baseline_samples for r in self.rows))


def report_verdicts(report: Report) -> list[AgentVerdict]:
    """One verdict per agent, in the order the agents were evaluated."""
    out = []
    for agent in report.agents:
        rows = [r for r in report.rows if r.agent == agent]
        forced = f" ({FORCED})" if agent in report.forced else ""
        regressions = [r.name for r in rows if r.regression]
        incomplete = [f"{r.name} scored in {len(r.samples)} of {r.repeats} repeats" for r in rows if r.incomplete]
        if agent in report.failed:
            verdict = AgentVerdict(agent, "evaluation failed", report.failed[agent], failed=True)
        elif agent in report.without_baseline:
            verdict = AgentVerdict(agent, "no baseline", f"not compared: no {agent}.json in {report.baselines_dir}")
        elif agent in report.empty_baseline:
            verdict = AgentVerdict(agent, "empty baseline", "the baseline holds no scores to compare", failed=True)
        elif regressions:
            verdict = AgentVerdict(agent, "regression" + forced, ", ".join(regressions), failed=True, compared=True)
        elif incomplete:
            verdict = AgentVerdict(agent, "incomplete" + forced, ", ".join(incomplete), failed=True, compared=True)
        else:
            verdict = AgentVerdict(agent, "ok" + forced, compared=True)
        out.append(verdict)
    return out


def report_problems(report: Report) -> list[str]:
    """Why the harness fails ([] when it passes): regressions, failed or incomplete evaluations, empty
    baselines, and a run in which nothing at all could be compared."""
    out = []
    regressions = report.regressions
    if regressions:
        out.append(
            f"{len(regressions)} regression(s): "
            + ", ".join(
                f"{r.agent}/{r.name} {r.delta:+.2f}" if r.delta is not None else f"{r.agent}/{r.name} no score"
                for r in regressions
            )
        )
    if report.incomplete:
        out.append(
            "incomplete: "
            + ", ".join(
                f"{r.agent}/{r.name} scored in {len(r.samples)} of {r.repeats} repeats" for r in report.incomplete
            )
        )
    out += [f"{a}: the evaluation failed: {why}" for a, why in sorted(report.failed.items())]
    out += [f"{a}: the baseline holds no scores to compare" for a in report.empty_baseline]
    if report.agents and not any(v.compared for v in report_verdicts(report)):
        where = f"no baseline for {', '.join(report.without_baseline)} in {report.baselines_dir}"
        out.append(
            "nothing was compared: "
            + (where if report.without_baseline else "no agent has a baseline with scores")
            + " (record baselines with drift_baseline)"
        )
    return out


def report_summary(report: Report) -> str:
    """The report's last line: never a bare "No regressions" when an agent went uncompared."""
    problems = report_problems(report)
    forced = f" ({FORCED}: {', '.join(sorted(report.forced))})" if report.forced else ""
    if problems:
        return "Failed: " + "; ".join(problems) + forced + "."
    if report.without_baseline:
        compared = [v.agent for v in report_verdicts(report) if v.compared]
        return (
            f"No regressions among the {len(compared)} agent(s) compared ({', '.join(compared)}); "
            f"not compared, no baseline: {', '.join(report.without_baseline)}{forced}."
        )
    return f"No regressions{forced}."


def rule_text(rule: str, repeats: int, threshold: float, baseline_repeats: bool = False) -> str:
    """The regression rule in words, as the reports print it. baseline_repeats: some baseline kept its repeats."""
    against = (
        f"; against a baseline that kept its repeats, a drop of more than {threshold:.1f} that a two-sample t test on both "
        f"sides' repeats finds significant at {noise.ALPHA:g} over the agent's dimensions (Bonferroni)"
        if rule == "interval" and baseline_repeats
        else ""
    )
    if rule == "interval" and repeats >= 2:
        return (
            f"a drop of more than {threshold:.1f} whose bootstrap 95% CI over {repeats} repeats lies below the baseline"
            + against
        )
    note = " (one repeat: no interval, so the fixed rule)" if rule == "interval" else ""
    return f"a drop of more than {threshold:.1f} below the baseline{note}{against}"


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
    if first.agent is None:
        raise ValueError(f"run: drift run {first.run_id} has no agent")
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
        rubric=rubric_versions(first.agent, list(first.drift.dimensions)),
        max_messages=first.drift.sample_size,
        samples=per_dimension,
    )


def replay_judge(folder: Path, baseline: Baseline | None) -> ProviderSpec:
    """Mock-judge's judge: the baseline's recorded calls (none without a baseline), else the offline judge."""
    model = baseline.judge.model if baseline and baseline.judge and baseline.judge.model else "offline-rules-v1"
    return ProviderSpec("replay", model, options={"dir": str(folder / "recordings")})


class SetupRefused(ValueError):
    """A run refused before anything was judged: baselines of another setup. Its reports (refusal_markdown,
    refusal_junit) are still written, headed with the refusal and each difference, so a pull request's
    comment always appears."""

    def __init__(self, message: str, differences: dict[str, list[str]]):
        super().__init__(message)
        self.differences = differences


def setup_check(baselines: dict[str, Baseline | None], setups: dict[str, Setup], force: bool) -> dict[str, list[str]]:
    """Refuse baselines captured with another setup than the agent's in this run (SetupRefused); forced, return
    agent -> its differences, for every report to show."""
    differ = {a: setup_mismatches(b, setups[a]) for a, b in sorted(baselines.items()) if b is not None and b.has_scores}
    differ = {a: reasons for a, reasons in differ.items() if reasons}
    if differ and not force:
        some = next(iter(setups.values()))
        raise SetupRefused(
            f"setup: this run's judge is {some.judge.label}, judging the last {some.max_messages} messages; "
            + "; ".join(f"{a}: {', '.join(reasons)}" for a, reasons in differ.items())
            + ". Scores from another setup are not comparable: record new baselines with drift_baseline, or pass "
            "--force to compare anyway (every report then says so).",
            differ,
        )
    return differ


def refusal_markdown(refused: SetupRefused, *, mode: str) -> str:
    """The Markdown of a refused run: the refusal first, then each agent's differences; nothing was judged."""
    lines = [
        f"### Persona drift ({mode}) — REFUSED",
        "",
        f"**Not compared:** {refused}",
        "",
        "| agent | how its baseline's setup differs from this run's |",
        "|---|---|",
        *(f"| {agent} | {'; '.join(reasons)} |" for agent, reasons in sorted(refused.differences.items())),
        "",
        "Failed: the run was refused before anything was judged.",
    ]
    return "\n".join(lines) + "\n"


def refusal_junit(refused: SetupRefused, *, mode: str) -> str:
    """The JUnit XML of a refused run: one failing test case per agent whose baseline differs, naming each
    difference."""
    suite = ET.Element("testsuite", name="persona-drift (refused)")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="mode", value=mode)
    ET.SubElement(props, "property", name="refused", value=str(refused))
    for agent, reasons in sorted(refused.differences.items()):
        case = ET.SubElement(suite, "testcase", classname=f"drift.{agent}", name="setup")
        failure = ET.SubElement(case, "failure", message=f"refused: {'; '.join(reasons)}")
        failure.text = str(refused)
    suite.set("tests", str(len(refused.differences)))
    suite.set("failures", str(len(refused.differences)))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


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
    batch: bool = False,
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
    report = Report(
        mode=mode,
        rule=rule,
        repeats=repeats,
        threshold=threshold,
        agents=[a.pk for a in agents],
        baselines_dir=str(baselines_dir),
        without_baseline=[a for a, b in baselines.items() if b is None],
        empty_baseline=[a for a, b in baselines.items() if b is not None and not b.has_scores],
    )
    dimensions = known_dimensions()
    if mode == "mock-judge":
        # What scores a request no recording matches; a baseline of any other judge would be compared
        # with the offline judge's scores wherever the messages or claims changed.
        config = JudgeConfig.from_label(get_llm("proposition_judge", override="offline").label, PROMPT_VERSION)
        judges = sorted({b.judge.name for b in baselines.values() if b and b.judge and b.judge.name})
        report.judge = (
            f"mock-judge: recorded calls of {', '.join(judges)} replayed; "
            if judges
            else "mock-judge: no recorded calls (no baseline); "
        ) + f"{config.name} ({OFFLINE_NOTE}) where no recording matches"
    else:
        config = JudgeConfig.from_label(get_llm("proposition_judge", override=judge).label, PROMPT_VERSION)
        report.judge = judge_words(config)
    setups = {a.pk: Setup(config, rubric_versions(a, dimensions), MAX_MESSAGES) for a in agents}
    report.forced = setup_check(baselines, setups, force)

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
        runs = _evaluate(agent, report, judge=replay_judge(baselines_dir, baseline) if mode == "mock-judge" else judge,
                         source=source, batch=batch)  # fmt: skip
        if not runs:
            continue
        if mode == "synthetic":
            _link_corrections(agent, runs[0], unlinked[agent.pk])
        report.rows += _rows(agent.pk, runs, baseline, report, forced=agent.pk in report.forced)
    return report


def _evaluate(
    agent: Agent, report: Report, *, judge: str | ProviderSpec | None, source: str | None, batch: bool = False
) -> list[EvaluationRun]:
    """The agent's repeats; [] (and the reason kept) when one fails: a cut-short run is not a measurement.
    batch: the judge's calls go through its vendor's batch API (not in mock-judge mode, which replays)."""
    runs: list[EvaluationRun] = []
    for _ in range(report.repeats):
        run = drift_evaluate(agent=agent, judge=judge, source=source, sample_size=report.max_messages, batch=batch)
        report.runs.append(run)
        if run.status != "completed":
            report.failed[agent.pk] = f"{run.run_id} {run.status}: {run.error or 'no reason recorded'}"
            return []
        runs.append(run)
    return runs


def _rows(
    agent: str, runs: list[EvaluationRun], baseline: Baseline | None, report: Report, *, forced: bool
) -> list[Row]:
    base_samples = {d: v for d, v in (baseline.samples if baseline else {}).items() if len(v) >= 2}

    def row(dimension: str, expected: float | None, samples: list[float], proposition: str = "") -> Row:
        return Row(
            agent,
            dimension,
            expected,
            samples,
            proposition=proposition,
            judged_by=judged_by.get(dimension, ""),
            rule=report.rule,
            threshold=report.threshold,
            repeats=report.repeats,
            forced=forced,
            baseline_samples=[] if proposition else base_samples.get(dimension, []),
            family=max(1, len(base_samples)),
        )

    judged_by = runs[0].drift.judged_by or {}
    scores = [run_scores(r) for r in runs]
    dimensions = list(runs[0].drift.dimensions)
    dimensions += sorted(set(baseline.dimensions if baseline else {}) - set(dimensions))
    rows = [
        row(d, baseline.dimensions.get(d) if baseline else None, [s[d] for s in scores if d in s]) for d in dimensions
    ]
    if baseline and baseline.proposition_scores:
        per_run = [proposition_scores(r) for r in runs]
        found = set(PropositionScore.objects.filter(evaluation_run=runs[0]).values_list("dimension", "proposition_id"))
        for key, expected in baseline.proposition_scores.items():
            where = _proposition_key(key, dimensions, found)
            rows.append(row(where[0], expected, [s[where] for s in per_run if where in s], proposition=where[1]))
    return rows


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _status(r: Row) -> str:
    return _verdict(r) + (f" ({FORCED})" if r.forced and r.baseline is not None else "")


def _verdict(r: Row) -> str:
    if r.regression:
        return "no score" if r.score is None else "regression"
    if r.incomplete:
        return f"incomplete: {len(r.samples)} of {r.repeats} repeats"
    if r.baseline is None:
        return "no baseline" if r.score is not None else "unscored"
    if r.delta is not None and r.delta < -r.threshold:
        test = row_test(r) if r.rule == "interval" else None
        if test is not None and test.p_value is not None:
            return (
                f"ok (within the noise: p {test.p_value:.2g} against the baseline's {len(r.baseline_samples)} repeats)"
            )
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
        f"### Persona drift ({report.mode})" + (f" — {FORCED.upper()}" if report.forced else ""),
        "",
        "Judge: " + report.judge.replace("\n", "  \n"),
        "",
    ]
    if report.forced:
        lines += [
            f"**{FORCED.capitalize()} (--force):** these baselines were captured with another setup and compared "
            "anyway; their deltas are not a like-for-like measure.",
            "",
            *(f"- {agent}: {'; '.join(reasons)}" for agent, reasons in sorted(report.forced.items())),
            "",
        ]
    lines += [
        f"Repeats: {report.repeats}. A regression is {report.rule_text}. "
        f"Window: the last {report.max_messages} messages of each agent.",
        "",
        *table(dims, "dimension"),
    ]
    if props:
        lines += ["", "#### Propositions", "", *table(props, "proposition")]
    lines += ["", "#### Agents", "", "| agent | verdict | |", "|---|---|---|"]
    lines += [f"| {v.agent} | {v.verdict} | {v.reason or '-'} |" for v in report.verdicts]
    lines += ["", report.summary]
    return "\n".join(lines) + "\n"


def junit(report: Report) -> str:
    forced_note = "; ".join(f"{a}: {', '.join(reasons)}" for a, reasons in sorted(report.forced.items()))
    suite = ET.Element("testsuite", name="persona-drift" + (f" ({FORCED})" if report.forced else ""))
    props = ET.SubElement(suite, "properties")
    for name, value in (("mode", report.mode), ("judge", report.judge), ("rule", report.rule_text)):
        ET.SubElement(props, "property", name=name, value=value)
    if report.forced:
        ET.SubElement(props, "property", name="forced", value=forced_note)
    failures = errors = skipped = 0
    for r in report.rows:
        case = ET.SubElement(
            suite, "testcase", classname=f"drift.{r.agent}", name=r.name + (f" [{FORCED}]" if r.forced else "")
        )
        if r.forced:
            ET.SubElement(case, "system-out").text = f"{FORCED}: " + "; ".join(report.forced.get(r.agent, []))
        if r.regression:
            failures += 1
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{r.name} fell {-(r.delta or 0):.2f} below its baseline"
                if r.score is not None
                else f"{r.name} has no score",
            )
            failure.text = f"baseline {r.baseline}, score {r.score}, 95% CI {r.ci}, judged by {r.judged_by}"
        elif r.incomplete:
            failures += 1
            ET.SubElement(case, "failure", message=f"{r.name} scored in {len(r.samples)} of {r.repeats} repeats")
        elif r.score is None:
            skipped += 1
            ET.SubElement(case, "skipped", message="no score")
        elif r.baseline is None:
            skipped += 1
            ET.SubElement(case, "skipped", message="no baseline: not compared")
    for v in report.verdicts:
        if v.verdict == "evaluation failed":
            errors += 1
            case = ET.SubElement(suite, "testcase", classname=f"drift.{v.agent}", name="evaluation")
            ET.SubElement(case, "error", message=f"the evaluation failed: {v.reason}")
        elif v.verdict == "empty baseline":
            failures += 1
            case = ET.SubElement(suite, "testcase", classname=f"drift.{v.agent}", name="baseline")
            ET.SubElement(case, "failure", message=v.reason)
    nothing = next((p for p in report.problems if p.startswith("nothing was compared")), None)
    if nothing:
        failures += 1
        case = ET.SubElement(suite, "testcase", classname="drift", name="comparison")
        ET.SubElement(case, "failure", message=nothing)
    suite.set("tests", str(len(suite.findall("testcase"))))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


__all__ = [
    "DIMENSIONS",
    "SetupRefused",
    "baseline_from_runs",
    "harness_run",
    "junit",
    "markdown",
    "refusal_junit",
    "refusal_markdown",
    "run_judge",
]
