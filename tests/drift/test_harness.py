"""The regression harness: mock-judge replays with no network, regressions fail, reports are written."""

import json
import shutil
import time
from io import StringIO
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from django.core.management import CommandError, call_command

from evaluation.drift.engine import PROMPT_VERSION
from evaluation.models import AgentMessage, EvaluationRun

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db
CAST = ["bertrand", "ivy", "juniper", "marigold", "rex"]


@pytest.fixture
def baselines(tmp_path):
    shutil.copytree(ROOT / "baselines", tmp_path / "baselines")
    return tmp_path / "baselines"


def test_mock_judge_runs_the_cast_with_no_http_and_matches_the_baselines(catalog, baselines, loopback, tmp_path):
    started = time.perf_counter()
    out = StringIO()
    call_command(
        "drift_run",
        "--mode",
        "mock-judge",
        "--baselines",
        str(baselines),
        "--markdown",
        str(tmp_path / "t.md"),
        "--junit",
        str(tmp_path / "j.xml"),
        stdout=out,
    )
    elapsed = time.perf_counter() - started
    assert elapsed < 60
    assert loopback.count() == 0
    runs = EvaluationRun.objects.filter(kind="drift")
    assert sorted(runs.values_list("agent_id", flat=True)) == CAST
    for run in runs:
        assert set(run.drift.judged_by.values()) == {"replay/offline-rules-v1"}, run.drift.judged_by
    for agent in CAST:
        expected = json.loads((baselines / f"{agent}.json").read_text())["dimensions"]
        got = {s.dimension: s.score for s in runs.get(agent_id=agent).dimension_scores.all()}
        assert got == pytest.approx(expected), agent
    table = (tmp_path / "t.md").read_text()
    assert "| marigold | adherence | replay/offline-rules-v1 |" in table and "No regressions." in table
    assert "Judge: mock-judge: recorded calls of offline/offline-rules-v1 replayed" in table
    suite = ET.parse(tmp_path / "j.xml").getroot()
    propositions = sum(
        len(scores)
        for a in CAST
        for scores in json.loads((baselines / f"{a}.json").read_text())["proposition_scores"].values()
    )
    assert suite.get("tests") == str(20 + propositions) and suite.get("failures") == "0"
    judge = suite.find("properties/property[@name='judge']").get("value")
    assert judge.startswith("mock-judge: recorded calls of offline/offline-rules-v1")
    assert AgentMessage.objects.filter(source="cast").count() == 25


def test_a_drop_of_more_than_one_point_is_a_regression(catalog, baselines, tmp_path):
    path = baselines / "rex.json"
    doc = json.loads(path.read_text())
    doc["dimensions"]["adherence"] += 1.5
    doc["dimensions"]["fluency"] += 0.9  # within tolerance
    path.write_text(json.dumps(doc))
    with pytest.raises(CommandError, match=r"1 regression\(s\): rex/adherence -1.50"):
        call_command(
            "drift_run",
            "--mode",
            "mock-judge",
            "--baselines",
            str(baselines),
            "--junit",
            str(tmp_path / "j.xml"),
            "--agents",
            "rex",
            stdout=StringIO(),
        )
    failures = ET.parse(tmp_path / "j.xml").getroot().findall("testcase/failure")
    assert [f.get("message") for f in failures] == ["adherence fell 1.50 below its baseline"]


def test_a_changed_message_is_scored_by_the_offline_judge_and_the_report_says_so(catalog, baselines, tmp_path):
    """Mock-judge scores any input: a request with no recording goes to the offline judge (main: ReplayMiss)."""
    call_command(
        "drift_run", "--mode", "mock-judge", "--baselines", str(baselines), "--agents", "ivy", stdout=StringIO()
    )
    AgentMessage.objects.filter(agent_id="ivy", source="cast").update(text="Something else entirely.")
    try:
        call_command(
            "drift_run", "--mode", "mock-judge", "--baselines", str(baselines), "--agents", "ivy",
            "--markdown", str(tmp_path / "t.md"), stdout=StringIO(),
        )  # fmt: skip
    except CommandError as exc:
        assert "regression" in str(exc)
    run = EvaluationRun.objects.filter(agent_id="ivy").latest("created_at")
    assert run.status == "completed"
    assert run.drift.judged_by["adherence"] == "offline/offline-rules-v1 (no recording matched)"
    table = (tmp_path / "t.md").read_text()
    assert "| ivy | adherence | offline/offline-rules-v1 (no recording matched) |" in table


def test_mock_judge_reads_only_the_runs_own_source(catalog, baselines):
    """Convergence reads the channel; a message ingested there must not change a cast replay."""
    from evaluation.drift.services import messages_ingest_body

    messages_ingest_body(json.dumps({"agent": "rex", "channel": "general", "text": "Brand new, from production."}))
    call_command(
        "drift_run", "--mode", "mock-judge", "--baselines", str(baselines), "--agents", "ivy", stdout=StringIO()
    )
    run = EvaluationRun.objects.get(agent_id="ivy")
    assert set(run.drift.judged_by.values()) == {"replay/offline-rules-v1"}
    expected = json.loads((baselines / "ivy.json").read_text())["dimensions"]
    assert {s.dimension: s.score for s in run.dimension_scores.all()} == pytest.approx(expected)


def test_baseline_command_records_what_mock_judge_replays(catalog, tmp_path):
    folder = tmp_path / "fresh"
    call_command(
        "drift_baseline", "--agents", "rex,ivy", "--baselines", str(folder), "--judge", "offline", stdout=StringIO()
    )
    assert sorted(p.name for p in folder.glob("*.json")) == ["ivy.json", "rex.json"]
    assert any((folder / "recordings" / "proposition_judge").iterdir())
    doc = json.loads((folder / "rex.json").read_text())
    # The judge that ran, not "live": main wrote mode "live" and no provider for the offline judge.
    assert (
        doc["judge"] == {"provider": "offline", "model": "offline-rules-v1", "prompt": PROMPT_VERSION}
        and doc["mode"] == "offline"
    )
    assert doc["proposition_scores"]["adherence"]["rex-blunt"] == pytest.approx(7.2)
    call_command(
        "drift_run", "--mode", "mock-judge", "--baselines", str(folder), "--agents", "rex,ivy", stdout=StringIO()
    )


def test_synthetic_mode_generates_then_evaluates(catalog, tmp_path):
    out = StringIO()
    with pytest.raises(CommandError, match=r"nothing was compared: no baseline for juniper, rex"):
        call_command(
            "drift_run", "--mode", "synthetic", "--agents", "rex,juniper", "--judge", "offline", "--rounds", "2",
            "--baselines", str(tmp_path), stdout=out,
        )  # fmt: skip
    assert AgentMessage.objects.filter(source="synthetic").count() == 4
    assert "| rex | adherence | offline/offline-rules-v1 | - |" in out.getvalue()
    assert "| juniper | no baseline |" in out.getvalue()


def test_unknown_agent_and_missing_baseline_are_clear_errors(catalog, tmp_path):
    with pytest.raises(CommandError, match="no agent 'ghost'"):
        call_command("drift_run", "--agents", "ghost", "--mode", "mock-judge", stdout=StringIO())
    with pytest.raises(CommandError, match=r"nothing was compared: no baseline for rex in \S+ \(record baselines"):
        call_command(
            "drift_run", "--agents", "rex", "--mode", "mock-judge", "--baselines", str(tmp_path), stdout=StringIO()
        )


def test_live_mode_with_no_judge_configured_says_the_offline_judge_scored(catalog, tmp_path):
    err, out = StringIO(), StringIO()
    with pytest.raises(CommandError, match="nothing was compared"):
        call_command("drift_run", "--agents", "rex", "--baselines", str(tmp_path), stdout=out, stderr=err)
    assert "no judge is configured for proposition_judge" in err.getvalue()
    assert "Judge: offline/offline-rules-v1 (the offline rule-based judge: no LLM)" in out.getvalue()
