"""Every gate compares, or says loudly why it cannot: a baseline is compared only with the setup it was
captured with (judge provider, model and prompt, proposition sets, window), in every mode; a forced
comparison says so in every report; an agent without a baseline is "no baseline", never a pass; and a
run that compares nothing, or whose evaluation failed or is incomplete, fails."""

import itertools
import json
import re
import shutil
from datetime import timedelta
from io import StringIO
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from evaluation.drift.engine import PROMPT_VERSION
from evaluation.models import Agent, AgentMessage, EvaluationRun, Proposition
from evaluation.providers.loopback import Reply

ROOT = Path(__file__).resolve().parents[2]
CAST = ["bertrand", "ivy", "juniper", "marigold", "rex"]
pytestmark = pytest.mark.django_db


@pytest.fixture
def baselines(tmp_path):
    shutil.copytree(ROOT / "baselines", tmp_path / "baselines")
    return tmp_path / "baselines"


def edit(path: Path, **changes) -> None:
    doc = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    path.write_text(json.dumps(doc))


LAST: dict[str, str] = {}
"""What the last drift_run printed, kept when it fails."""


def drift_run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("drift_run", *args, stdout=out, stderr=err)
    finally:
        LAST.update(out=out.getvalue(), err=err.getvalue())
    return out.getvalue(), err.getvalue()


def scores(value: int | None = 5, *, after: int = 10**9, status: int = 200):
    """A judge giving every check `value` for its first `after` calls, then answering `status` (or no scores)."""
    count = itertools.count()

    def respond(endpoint, body, n):
        if next(count) >= after:
            return Reply(status=status, json={"scores": []}) if status != 200 else Reply(json={"scores": []})
        ids = re.findall(r"### Check (\S+)", body["messages"][-1]["content"])
        return Reply(json={"scores": [{"id": i, "score": value, "reasoning": "ok"} for i in ids]})

    return respond


def record(loopback, folder: Path, agents: str) -> int:
    """Record baselines with the loopback judge; returns how many judge calls that took."""
    before = len(loopback.requests)
    call_command(
        "drift_baseline", "--agents", agents, "--judge", f"openai/j@{loopback.openai_url}", "--baselines", str(folder),
        stdout=StringIO(),
    )  # fmt: skip
    return len(loopback.requests) - before


# --- refusals: one per part of the setup ---------------------------------------------------------


def test_a_baseline_from_another_judge_model_is_refused(catalog, baselines, tmp_path):
    edit(baselines / "rex.json", judge={"provider": "offline", "model": "offline-rules-v2", "prompt": PROMPT_VERSION})
    md, xml = tmp_path / "drift.md", tmp_path / "drift.xml"
    with pytest.raises(CommandError) as refused:
        drift_run(
            "--agents", "rex", "--judge", "offline", "--baselines", str(baselines), "--markdown", str(md),
            "--junit", str(xml),
        )  # fmt: skip
    message = str(refused.value)
    assert f"rex: the baseline was scored by offline/offline-rules-v2 (prompt {PROMPT_VERSION})" in message
    assert f"this run's judge is offline/offline-rules-v1 (prompt {PROMPT_VERSION})" in message
    assert "--force" in message
    assert not EvaluationRun.objects.exists()  # refused before anything is judged
    # the refusal still writes both reports, headed with it and each difference: the PR comment appears
    text = md.read_text()
    assert text.startswith("### Persona drift (live) — REFUSED") and f"**Not compared:** {message}" in text
    assert f"| rex | the baseline was scored by offline/offline-rules-v2 (prompt {PROMPT_VERSION})" in text
    suite = ET.parse(xml).getroot()
    assert suite.get("name") == "persona-drift (refused)" and suite.get("failures") == "1"
    (case,) = suite.iter("testcase")
    assert case.get("classname") == "drift.rex" and "offline-rules-v2" in case.find("failure").get("message")


def test_a_baseline_that_does_not_record_its_judge_provider_is_refused(catalog, baselines):
    edit(baselines / "rex.json", judge={"model": "offline-rules-v1", "prompt": PROMPT_VERSION})
    with pytest.raises(
        CommandError, match=r"scored by offline-rules-v1 \(prompt \w+\), and does not record its provider"
    ):
        drift_run("--mode", "mock-judge", "--agents", "rex", "--baselines", str(baselines))


def test_a_changed_proposition_set_is_another_rubric_refused_unless_forced(catalog, baselines, tmp_path):
    Proposition.objects.filter(proposition_id="rex-blunt").update(claim="{{agent_name}} is blunt, always.")
    with pytest.raises(CommandError, match=r"rex: the adherence propositions changed \(rubric \w{12} in the baseline"):
        drift_run("--mode", "mock-judge", "--agents", "rex,ivy", "--baselines", str(baselines))
    assert not EvaluationRun.objects.exists()
    out, err = drift_run(
        "--mode", "mock-judge", "--agents", "rex,ivy", "--baselines", str(baselines), "--force",
        "--junit", str(tmp_path / "j.xml"),
    )  # fmt: skip
    assert "- rex: the adherence propositions changed" in out and "- ivy" not in out  # ivy's rubric is as recorded
    assert "| rex | ok (forced comparison) |" in out and "| ivy | ok |" in out
    assert "warning: rex: forced comparison (--force): the adherence propositions changed" in err
    names = {
        c.get("name") for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase") if "rex" in c.get("classname")
    }
    assert names and all(n.endswith(" [forced comparison]") for n in names)


def test_a_baseline_with_another_window_or_no_recorded_setup_is_refused(catalog, baselines):
    edit(baselines / "rex.json", max_messages=50)
    with pytest.raises(CommandError, match="rex: the baseline judged the last 50 messages, this run the last 20"):
        drift_run("--mode", "mock-judge", "--agents", "rex", "--baselines", str(baselines))
    edit(baselines / "rex.json", max_messages=None, rubric=None)
    with pytest.raises(CommandError) as refused:
        drift_run("--mode", "mock-judge", "--agents", "rex", "--baselines", str(baselines))
    assert "does not record the versions of its proposition sets" in str(refused.value)
    assert "does not record its window" in str(refused.value)


def test_a_bad_rubric_or_window_in_a_baseline_names_the_field(catalog, baselines):
    edit(baselines / "rex.json", max_messages="twenty")
    with pytest.raises(CommandError, match=r"rex.json: max_messages: 'twenty' is not a whole number"):
        drift_run("--mode", "mock-judge", "--agents", "rex", "--baselines", str(baselines))
    edit(baselines / "rex.json", max_messages=20, rubric=["adherence"])
    with pytest.raises(CommandError, match=r"rex.json: rubric: must be an object"):
        drift_run("--mode", "mock-judge", "--agents", "rex", "--baselines", str(baselines))


# --- mock-judge applies the same refusal -----------------------------------------------------------


def test_mock_judge_with_an_llm_recorded_baseline_is_refused_unless_forced_and_labelled_everywhere(
    catalog, tmp_path, loopback
):
    folder = tmp_path / "llm"
    loopback.responder = scores(6)
    record(loopback, folder, "rex")
    loopback.reset()
    with pytest.raises(CommandError) as refused:
        drift_run("--mode", "mock-judge", "--agents", "rex", "--baselines", str(folder))
    message = str(refused.value)
    assert f"rex: the baseline was scored by openai/j (prompt {PROMPT_VERSION})" in message
    assert f"this run's judge is offline/offline-rules-v1 (prompt {PROMPT_VERSION})" in message
    assert EvaluationRun.objects.filter(drift__is_baseline=False).count() == 0

    md, xml = tmp_path / "t.md", tmp_path / "j.xml"
    out, err = drift_run(
        "--mode", "mock-judge", "--agents", "rex", "--baselines", str(folder), "--force",
        "--markdown", str(md), "--junit", str(xml),
    )  # fmt: skip
    assert loopback.count() == 0  # replayed, no network
    table = md.read_text()
    assert table == out
    assert table.startswith("### Persona drift (mock-judge) — FORCED COMPARISON\n")
    assert "**Forced comparison (--force):**" in table
    assert "- rex: the baseline was scored by openai/j" in table
    rows = [line for line in table.splitlines() if line.startswith("| rex | ") and line.count("|") == 9]
    assert rows and all(line.endswith("(forced comparison) |") for line in rows), rows
    assert "| rex | ok (forced comparison) |" in table or "| rex | regression (forced comparison) |" in table
    assert table.rstrip().endswith("(forced comparison: rex).")
    suite = ET.parse(xml).getroot()
    assert suite.get("name") == "persona-drift (forced comparison)"
    assert "rex: the baseline was scored by openai/j" in suite.find("properties/property[@name='forced']").get("value")
    cases = suite.findall("testcase")
    assert cases and all(c.get("name").endswith(" [forced comparison]") for c in cases)
    assert all("the baseline was scored by openai/j" in c.find("system-out").text for c in cases)
    assert "warning: rex: forced comparison (--force)" in err


# --- no baseline, nothing compared ---------------------------------------------------------------


@pytest.fixture
def newcomer(catalog):
    """A character added to the cast in a pull request: messages of its own, no baseline yet."""
    agent = Agent.objects.create(id="newt", display_name="Newt", kind="character", persona_spec="A shy newcomer.")
    start = timezone.now()
    for i, text in enumerate(("Hello, I am new here.", "I brought seeds for the raised beds.", "Where do tools go?")):
        AgentMessage.objects.create(
            agent=agent, channel="newt-corner", text=text, source="cast", created_at=start + timedelta(seconds=i)
        )
    return agent


def test_a_new_character_in_mock_judge_gets_no_baseline_rows_and_the_reports_are_written(newcomer, baselines, tmp_path):
    md, xml = tmp_path / "drift.md", tmp_path / "drift.xml"
    out, err = drift_run(
        "--mode", "mock-judge", "--baselines", str(baselines), "--markdown", str(md), "--junit", str(xml)
    )
    table = md.read_text()
    newt = [line for line in table.splitlines() if line.startswith("| newt | ") and line.count("|") == 9]
    # scored where it can be (a lone speaker has no convergence), compared nowhere
    assert newt and all(line.endswith(("| - | no baseline |", "| - | unscored |")) for line in newt), newt
    assert re.search(
        r"^\| newt \| adherence \| offline/offline-rules-v1 \(no recording matched\) \| - \| \d\.\d\d \|", table, re.M
    )
    assert "| newt | no baseline | not compared: no newt.json in" in table
    for agent in CAST:
        assert f"| {agent} | ok |" in table
    assert table.rstrip().endswith(
        "No regressions among the 5 agent(s) compared (bertrand, ivy, juniper, marigold, rex); "
        "not compared, no baseline: newt."
    )
    assert "No regressions." not in table
    suite = ET.parse(xml).getroot()
    skipped = [c for c in suite.iter("testcase") if c.get("classname") == "drift.newt"]
    messages = [c.find("skipped").get("message") for c in skipped]
    assert "no baseline: not compared" in messages and set(messages) <= {"no baseline: not compared", "no score"}
    assert suite.get("failures") == "0" and suite.get("skipped") == str(len(skipped))
    assert "warning: newt: no baseline, not compared" in err


def test_when_nothing_could_be_compared_the_harness_fails_with_the_reports_written(newcomer, baselines, tmp_path):
    md, xml = tmp_path / "drift.md", tmp_path / "drift.xml"
    with pytest.raises(CommandError, match=r"^nothing was compared: no baseline for newt in \S+baselines"):
        drift_run("--mode", "mock-judge", "--agents", "newt", "--baselines", str(baselines),
                  "--markdown", str(md), "--junit", str(xml))  # fmt: skip
    assert "Judge: mock-judge: no recorded calls (no baseline); offline/offline-rules-v1" in md.read_text()
    assert md.read_text().rstrip().endswith("(record baselines with drift_baseline).")
    assert "Failed: nothing was compared" in md.read_text()
    suite = ET.parse(xml).getroot()
    failure = suite.find("testcase[@name='comparison']/failure")
    assert failure is not None and failure.get("message").startswith("nothing was compared")
    assert suite.get("failures") == "1"


def test_a_baseline_without_scores_fails_loudly(catalog, baselines):
    edit(baselines / "rex.json", dimensions={}, proposition_scores={})
    with pytest.raises(CommandError) as failed:
        drift_run("--mode", "mock-judge", "--agents", "rex,ivy", "--baselines", str(baselines))
    assert str(failed.value) == "rex: the baseline holds no scores to compare"
    assert "| rex | empty baseline |" in LAST["out"]


# --- evaluations that did not finish -------------------------------------------------------------


def test_a_failed_evaluation_fails_the_harness_and_the_others_are_still_compared(catalog, tmp_path, loopback):
    folder = tmp_path / "llm"
    loopback.responder = scores(5)
    ivy_calls = record(loopback, folder, "ivy")
    record(loopback, folder, "rex")
    loopback.reset()
    loopback.responder = scores(5, after=ivy_calls, status=401)  # ivy is judged first, then the key is refused
    md, xml = tmp_path / "t.md", tmp_path / "j.xml"
    with pytest.raises(CommandError) as failed:
        drift_run("--agents", "ivy,rex", "--judge", f"openai/j@{loopback.openai_url}", "--baselines", str(folder),
                  "--markdown", str(md), "--junit", str(xml))  # fmt: skip
    assert re.fullmatch(r"rex: the evaluation failed: drift_\S+ failed: .+", str(failed.value)), str(failed.value)
    table = md.read_text()
    assert "| ivy | ok |" in table and "| rex | evaluation failed | drift_" in table
    assert table.rstrip().splitlines()[-1].startswith("Failed: rex: the evaluation failed")
    suite = ET.parse(xml).getroot()
    assert suite.find("testcase[@classname='drift.rex'][@name='evaluation']/error") is not None
    assert suite.get("errors") == "1"


def test_a_dimension_scored_by_only_some_repeats_is_incomplete_not_a_pass(catalog, tmp_path, loopback):
    folder = tmp_path / "llm"
    loopback.responder = scores(5)
    calls = record(loopback, folder, "rex")
    loopback.reset()
    loopback.responder = scores(5, after=calls)  # the second repeat's judge leaves every check out
    with pytest.raises(CommandError) as failed:
        drift_run("--agents", "rex", "--judge", f"openai/j@{loopback.openai_url}", "--baselines", str(folder),
                  "--repeats", "2", "--junit", str(tmp_path / "j.xml"))  # fmt: skip
    assert "incomplete: rex/adherence scored in 1 of 2 repeats" in str(failed.value)
    assert "| rex | adherence |" in LAST["out"] and "incomplete: 1 of 2 repeats |" in LAST["out"]
    failures = {f.get("message") for f in ET.parse(tmp_path / "j.xml").getroot().iter("failure")}
    assert "adherence scored in 1 of 2 repeats" in failures
