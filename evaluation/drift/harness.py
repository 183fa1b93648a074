"""The regression harness (spec 002): evaluate agents, compare each dimension with its golden
baseline (a regression is a drop of more than 1.0), and report as Markdown and JUnit XML.

Modes: live (the configured judge), mock-judge (recorded judge calls replayed: no LLM, no
network, deterministic), synthetic (generate a conversation, then evaluate it).
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from django.utils import timezone

from evaluation.drift.characters import synthesize_conversation
from evaluation.drift.execution import drift_evaluate
from evaluation.drift.ingest import messages_ingest, parse_records
from evaluation.drift.scorers import DIMENSIONS
from evaluation.models import Agent, AgentMessage, EvaluationRun
from evaluation.providers import ProviderSpec
from evaluation.runs.selectors import run_scores

REGRESSION_DROP = 1.0
MODES = ("live", "mock-judge", "synthetic")


@dataclass
class Row:
    agent: str
    dimension: str
    baseline: float | None
    score: float | None

    @property
    def delta(self) -> float | None:
        return None if self.baseline is None or self.score is None else round(self.score - self.baseline, 3)

    @property
    def regression(self) -> bool:
        """A drop of more than REGRESSION_DROP, or no score at all where a baseline expects one."""
        if self.baseline is not None and self.score is None:
            return True
        return self.delta is not None and self.delta < -REGRESSION_DROP


@dataclass
class Report:
    mode: str
    rows: list[Row] = field(default_factory=list)
    runs: list[EvaluationRun] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.regression]


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


def baseline_file(folder: Path, agent_id: str) -> Path:
    return folder / f"{agent_id}.json"


def read_baseline(folder: Path, agent_id: str) -> dict[str, Any] | None:
    path = baseline_file(folder, agent_id)
    return json.loads(path.read_text()) if path.is_file() else None


def write_baseline(folder: Path, run: EvaluationRun, *, mode: str) -> Path:
    path = baseline_file(folder, run.agent_id or "")
    folder.mkdir(parents=True, exist_ok=True)
    doc = {
        "agent": run.agent_id,
        "dimensions": run_scores(run),
        "overall": run.overall_score,
        "judge_model": run.judge_label.split("/", 1)[1] if "/" in run.judge_label else run.judge_label,
        "mode": mode,
        "sample_size": run.drift.messages_judged,
        "created_at": timezone.now().isoformat(),
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def replay_judge(folder: Path, baseline: dict[str, Any]) -> ProviderSpec:
    return ProviderSpec(
        "replay", baseline.get("judge_model") or "offline-rules-v1", options={"dir": str(folder / "recordings")}
    )


def harness_run(
    *, agent_ids: list[str], mode: str, baselines_dir: Path, cast_file: Path, judge: str | None = None, rounds: int = 4
) -> Report:
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    agents = list(Agent.objects.filter(pk__in=agent_ids))
    unknown = sorted(set(agent_ids) - {a.pk for a in agents})
    if unknown:
        raise ValueError(f"agents: no agent {', '.join(map(repr, unknown))}")
    report = Report(mode=mode)
    source: str | None = None
    if mode == "mock-judge":
        ensure_cast_messages(cast_file)
        source = "cast"
    elif mode == "synthetic":
        synthesize_conversation(agents, f"synthetic-{timezone.now():%Y%m%d%H%M%S}", rounds=rounds, provider=judge)
        source = "synthetic"
    for agent in sorted(agents, key=lambda a: a.pk):
        baseline = read_baseline(baselines_dir, agent.pk)
        if mode == "mock-judge":
            if baseline is None:
                raise ValueError(
                    f"mock-judge: no baseline for {agent.pk} in {baselines_dir} (record one with drift_baseline)"
                )
            run = drift_evaluate(agent=agent, judge=replay_judge(baselines_dir, baseline), source=source)
        else:
            run = drift_evaluate(agent=agent, judge=judge, source=source)
        if run.status != "completed":
            raise RuntimeError(f"{agent.pk}: the evaluation failed: {run.error}")
        report.runs.append(run)
        scores = run_scores(run)
        for dimension in DIMENSIONS:
            report.rows.append(
                Row(agent.pk, dimension, (baseline or {}).get("dimensions", {}).get(dimension), scores.get(dimension))
            )
    return report


def markdown(report: Report) -> str:
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [
        f"### Persona drift ({report.mode})",
        "",
        "| agent | dimension | baseline | score | delta | |",
        "|---|---|---|---|---|---|",
    ]
    for r in report.rows:
        status = (
            "no score"
            if r.regression and r.score is None
            else "regression"
            if r.regression
            else "no baseline"
            if r.baseline is None
            else "ok"
        )
        delta = "-" if r.delta is None else f"{r.delta:+.2f}"
        lines.append(f"| {r.agent} | {r.dimension} | {fmt(r.baseline)} | {fmt(r.score)} | {delta} | {status} |")
    n = len(report.regressions)
    lines += [
        "",
        f"{n} regression(s) (a drop of more than {REGRESSION_DROP:.1f} below the baseline)."
        if n
        else "No regressions.",
    ]
    return "\n".join(lines) + "\n"


def junit(report: Report) -> str:
    suite = ET.Element(
        "testsuite", name="persona-drift", tests=str(len(report.rows)), failures=str(len(report.regressions))
    )
    for r in report.rows:
        case = ET.SubElement(suite, "testcase", classname=f"drift.{r.agent}", name=r.dimension)
        if r.regression:
            failure = ET.SubElement(
                case, "failure", message=f"{r.dimension} fell {-(r.delta or 0):.2f} below its baseline"
            )
            failure.text = f"baseline {r.baseline}, score {r.score}"
        elif r.score is None:
            ET.SubElement(case, "skipped", message="no score")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)
