"""Spec 002 behaviour: anonymised convergence, template variables, accepting baselines in the admin,
and the CI job measuring a persona change (a PR-shaped check)."""

import json
import re
import shlex
import shutil
from io import StringIO
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.utils import timezone

from evaluation.drift.engine import PROMPT_VERSION
from evaluation.drift.services import drift_evaluate, messages_ingest_body
from evaluation.models import Agent, AgentMessage, EvaluationRun, PropositionSet
from evaluation.providers.loopback import Reply

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def fives(endpoint, body, n):
    ids = re.findall(r"### Check (\S+)", body["messages"][-1]["content"])
    return Reply(json={"scores": [{"id": i, "score": 5, "reasoning": "ok"} for i in ids]})


@pytest.fixture
def pair(db):
    ana = Agent.objects.create(id="ana", display_name="Ana Lopes", kind="character", persona_spec="Warm.")
    bo = Agent.objects.create(id="bo", display_name="Bo Chen", kind="character", persona_spec="Dry.")
    Agent.objects.create(id="cy", display_name="Cyrus Vale", kind="character", persona_spec="Absent.")
    start = timezone.now()
    texts = [
        (ana, "Bo, I think the roses need water."),
        (bo, "Ana Lopes is right, as ever. Cyrus would disagree."),
        (ana, "Thanks, Bo Chen. Let's ask Cyrus about the ivy."),
    ]
    for i, (agent, text) in enumerate(texts):
        AgentMessage.objects.create(
            agent=agent, channel="garden", recipient="Bo", text=text, created_at=start + timezone.timedelta(seconds=i)
        )
    return ana


def test_convergence_replaces_cast_names_inside_the_text(pair, loopback):
    pset = PropositionSet.objects.create(dimension="convergence", agent_key="_default")
    pset.propositions.create(proposition_id="distinct", claim="The voices differ in #{{channel_name}}", weight=1)
    loopback.responder = fives
    run = drift_evaluate(agent=pair, dimensions=["convergence"], judge=f"openai/j@{loopback.openai_url}")
    assert run.status == "completed", run.error
    prompt = loopback.requests[0].body["messages"][-1]["content"]
    context = prompt.split("Context:")[1]
    for name in ("Ana", "Lopes", "Bo", "Chen", "Cyrus"):
        assert not re.search(rf"\b{name}\b", context), (name, context)
    assert "ask another member about the ivy." in context  # a plant, not a name
    assert "Speaker B: Speaker A is right, as ever. another member would disagree." in context
    assert "Claim: The voices differ in #garden" in prompt


def test_fluency_claims_get_channel_and_recipient(pair, loopback):
    pset = PropositionSet.objects.create(dimension="fluency", agent_key="_default")
    pset.propositions.create(
        proposition_id="varied",
        claim="{{agent_name}} varies in #{{channel_name}} when writing to {{recipient_name}}",
        weight=1,
    )
    loopback.responder = fives
    drift_evaluate(agent=pair, dimensions=["fluency"], judge=f"openai/j@{loopback.openai_url}")
    prompt = loopback.requests[0].body["messages"][-1]["content"]
    assert "Claim: Ana Lopes varies in #garden when writing to Bo" in prompt and "{{" not in prompt


def test_the_admin_accepts_a_drift_run_as_the_golden_baseline(catalog, staff_client, settings, tmp_path):
    settings.EVALUATION = {**settings.EVALUATION, "BASELINES_DIR": tmp_path / "golden"}
    messages_ingest_body((ROOT / "cast" / "messages.jsonl").read_text())  # something to score
    with pytest.raises(CommandError, match="nothing was compared"):
        call_command(
            "drift_run", "--agents", "rex", "--judge", "offline", "--baselines", str(tmp_path), stdout=StringIO()
        )
    run = EvaluationRun.objects.get(agent_id="rex")
    response = staff_client.post(
        "/admin/evaluation/driftrun/", {"action": "accept_as_baseline", "_selected_action": [run.pk]}, follow=True
    )
    assert response.status_code == 200
    assert "baseline written to rex.json" in response.content.decode()
    doc = json.loads((tmp_path / "golden" / "rex.json").read_text())
    assert doc["judge"] == {"provider": "offline", "model": "offline-rules-v1", "prompt": PROMPT_VERSION}
    assert doc["dimensions"] == {s.dimension: s.score for s in run.dimension_scores.all()}
    assert doc["dimensions"] and doc["rubric"].keys() == doc["dimensions"].keys() and doc["max_messages"] == 20
    # and the harness reads what the admin accepted, and compares with it
    out = StringIO()
    call_command("drift_run", "--agents", "rex", "--judge", "offline", stdout=out)
    assert "| rex | ok |" in out.getvalue() and "No regressions." in out.getvalue()


def workflow_commands() -> list[list[str]]:
    """The manage.py commands the persona-drift CI job runs, as it lists them."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "persona-drift.yml").read_text())
    commands = []
    for step in workflow["jobs"]["drift"]["steps"]:
        for part in str(step.get("run", "")).split("&&"):
            words = shlex.split(part)
            if words[:2] == ["python", "manage.py"]:
                commands.append(words[2:])
    return commands


def test_a_pull_request_editing_a_cast_persona_gets_a_scored_table_naming_the_judge(settings, tmp_path, monkeypatch):
    """The CI job's own commands on a scratch copy in which marigold's persona was edited: no replay
    miss, every dimension scored, a comment body that names the judge (main: ReplayMiss, no table)."""
    scratch = tmp_path / "repo"
    for folder in ("cast", "propositions", "personas", "topics", "baselines"):
        shutil.copytree(ROOT / folder, scratch / folder)
    cast = scratch / "cast" / "marigold.yaml"
    doc = yaml.safe_load(cast.read_text())
    doc["persona_spec"] = "Marigold is a cheerful retired sailor who talks about knots and tides."
    cast.write_text(yaml.safe_dump(doc))
    settings.EVALUATION = {
        **settings.EVALUATION,
        **{f"{k.upper()}_DIR": scratch / k for k in ("cast", "propositions", "personas", "topics", "baselines")},
    }
    monkeypatch.chdir(scratch)
    commands = workflow_commands()
    assert [c[0] for c in commands] == ["migrate", "load_catalog", "drift_run"]
    failed = None
    for command in commands:
        try:
            call_command(*command, stdout=StringIO(), stderr=StringIO())
        except CommandError as exc:  # a regression fails the job, after the table is written
            failed = exc
    body = (scratch / "drift.md").read_text()
    assert "Judge: mock-judge: recorded calls of offline/offline-rules-v1 replayed" in body
    rows = [line for line in body.splitlines() if line.startswith("| marigold | ") and line.count("|") == 9]
    assert re.search(r"^\| marigold \| (ok|regression) \|", body, re.M)  # its verdict, in the agents table
    assert {line.split(" | ")[1] for line in rows} >= {"adherence", "consistency", "fluency", "convergence"}
    adherence = next(line for line in rows if line.split(" | ")[1] == "adherence")
    assert "offline/offline-rules-v1 (no recording matched)" in adherence
    assert all(re.search(r"\| \d\.\d\d \| [-\d]", line) for line in rows), rows  # every row has a score
    other = next(line for line in body.splitlines() if line.startswith("| rex | adherence |"))
    assert "replay/offline-rules-v1" in other  # unchanged personas still replay their recordings
    suite = ET.parse(scratch / "drift.xml").getroot()
    assert suite.find("properties/property[@name='judge']") is not None
    if failed is not None:
        assert "regression" in str(failed)
