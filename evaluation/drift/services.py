"""Drift writes, as the doors (API, admin, commands, tasks) call them: ingest, runs, the harness, corrections."""

from pathlib import Path
from typing import Any

from evaluation.conf import setting
from evaluation.drift import harness
from evaluation.drift.cast import CastMember, parse_cast
from evaluation.drift.corrections import GateDecision, gate_check, pre_invocation
from evaluation.drift.execution import agent_lookup, drift_evaluate, drift_run_execute, drift_run_start
from evaluation.drift.ingest import DriftMessageInput, messages_ingest, parse_records
from evaluation.drift.propositions import (
    PropositionFile,
    PropositionSpec,
    SetReplacement,
    parse_proposition_yaml,
    proposition_file_as_dict,
)
from evaluation.errors import Conflict, NotFound
from evaluation.models import AgentMessage, EvaluationRun, PropositionSet
from evaluation.models.runs import RunStatus

__all__ = [
    "CastMember",
    "DriftMessageInput",
    "parse_cast",
    "HARNESS_MODES",
    "HARNESS_RULES",
    "PropositionFile",
    "PropositionSpec",
    "SetReplacement",
    "proposition_set_replacement",
    "parse_proposition_yaml",
    "proposition_file_as_dict",
    "agent_lookup",
    "baseline_accept",
    "baseline_record",
    "drift_evaluate",
    "drift_run_execute",
    "drift_run_start",
    "gate",
    "harness_run",
    "messages_ingest_body",
    "pre_invocation_for",
    "report_junit",
    "SetupRefused",
    "refusal_markdown",
    "refusal_junit",
    "report_markdown",
]

harness_run = harness.harness_run
HARNESS_MODES = harness.MODES
HARNESS_RULES = harness.RULES
report_markdown = harness.markdown
report_junit = harness.junit
SetupRefused = harness.SetupRefused
refusal_markdown = harness.refusal_markdown
refusal_junit = harness.refusal_junit


def proposition_set_replacement(parsed: PropositionFile, *, file: str) -> SetReplacement | None:
    """What loading this file replaces: None when no set for its dimension and agent is stored yet, or
    when the stored one came from this same file and keeps every proposition."""
    stored = PropositionSet.objects.filter(dimension=parsed.dimension, agent_key=parsed.agent_id).first()
    if stored is None:
        return None
    kept = {p.id for p in parsed.propositions}
    dropped = tuple(sorted(set(stored.propositions.values_list("proposition_id", flat=True)) - kept))
    if stored.source_file == file and not dropped:
        return None
    return SetReplacement(parsed.dimension, parsed.agent_id, stored.source_file, dropped)


def messages_ingest_body(body: str | bytes) -> list[AgentMessage]:
    """Store messages sent as one JSON object, a JSON list or JSON lines; all or nothing."""
    return messages_ingest(parse_records(body))


def gate(*, agent_id: str, text: str, channel: str, attempt: int = 1, original_text: str = "") -> GateDecision:
    """Score a message before an external runtime commits it (spec 002's action gate)."""
    return gate_check(agent_lookup(agent_id), text=text, channel=channel, attempt=attempt, original_text=original_text)


def pre_invocation_for(*, agent_id: str, channel: str) -> dict[str, Any]:
    """What to add to the agent's next system prompt: a nudge and phrases to avoid."""
    return pre_invocation(agent_lookup(agent_id), channel.lstrip("#"))


def baseline_record(
    *, agent_id: str, judge: str | None, folder: Path, repeats: int = 1
) -> tuple[EvaluationRun, Path | None]:
    """Score the shipped cast's messages for one agent (repeats times) and write its baseline file, with
    the judge calls and the judge's provider/model; the path is None when a run failed (its error says why)."""
    agent = agent_lookup(agent_id)
    harness.ensure_cast_messages(Path(setting("CAST_DIR")) / "messages.jsonl")
    runs = []
    for _ in range(max(1, repeats)):
        run = drift_evaluate(
            agent=agent, judge=judge, source="cast", is_baseline=True, record_dir=folder / "recordings"
        )
        if run.status != RunStatus.COMPLETED:
            return run, None
        runs.append(run)
    return runs[-1], harness.baseline_from_runs(folder, runs, judge=harness.run_judge(runs[0]))


def baseline_accept(*, run_id: str, folder: Path | None = None) -> Path:
    """Make a completed drift run its agent's golden baseline (baselines/<agent>.json)."""
    run = EvaluationRun.objects.filter(run_id=run_id, kind="drift").select_related("drift").first()
    if run is None:
        raise NotFound(f"run: no drift run {run_id!r}")
    if run.status != RunStatus.COMPLETED:
        raise Conflict(f"run {run_id} is {run.status}; only a completed run can become a baseline")
    if run.judge_label.startswith("mock-judge"):
        raise Conflict(f"run {run_id} was scored in mock-judge mode; record a baseline with a real judge")
    return harness.baseline_from_runs(folder or Path(setting("BASELINES_DIR")), [run], judge=harness.run_judge(run))
