"""Files written for the persona-drift harness this app replaces, copied in as they are: a
`_default.yaml` without agent_id, a dimension of its own, context windows, the other baseline shape.
The catalogue loads them and the harness runs on them end to end with the offline judge."""

import json
import random
import shutil
from io import StringIO
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from django.core.management import CommandError, call_command

from evaluation.catalog import catalog_load
from evaluation.drift.characters import system_prompt
from evaluation.drift.offline import CharacterRule, offline_character
from evaluation.drift.services import drift_evaluate
from evaluation.models import Agent, AgentMessage, DimensionScore, EvaluationRun, PropositionScore, PropositionSet

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db

ADHERENCE_DEFAULT = """\
# no agent_id: the file name says it applies to every agent
propositions:
  - id: stays-in-character
    claim: "{{agent_name}} stays in character"
    weight: 1.0
"""
IDEAS = """\
first_n: 10
last_n: 100
propositions:
  - id: many-ideas
    claim: "{{agent_name}} proposes many different ideas"
    weight: 1.0
  - id: repeats-one-idea
    claim: "{{agent_name}} keeps repeating a single idea"
    weight: 0.5
    inverted: true
"""


@pytest.fixture
def tree(tmp_path, db):
    """Cast from the repo, propositions and baselines in the shapes a team brings."""
    shutil.copytree(ROOT / "cast", tmp_path / "cast")
    props = tmp_path / "propositions"
    for dimension in ("adherence", "consistency", "fluency", "convergence"):
        (props / dimension).mkdir(parents=True)
    (props / "adherence" / "_default.yaml").write_text(ADHERENCE_DEFAULT)
    (props / "consistency" / "_default.yaml").write_text(
        ADHERENCE_DEFAULT.replace("stays in character", "sounds the same")
    )
    (props / "fluency" / "_default.yaml").write_text(ADHERENCE_DEFAULT.replace("stays in character", "varies phrasing"))
    (props / "convergence" / "_default.yaml").write_text(
        ADHERENCE_DEFAULT.replace("{{agent_name}} stays in character", "The speakers sound different")
    )
    (props / "ideas_quantity").mkdir()
    (props / "ideas_quantity" / "_default.yaml").write_text(IDEAS)
    report = catalog_load(personas_dir=None, topics_dir=None, propositions_dir=props, cast_dir=tmp_path / "cast")
    assert report.ok, report.errors
    return tmp_path


def test_a_default_file_without_agent_id_and_a_dimension_of_its_own_load(tree):
    sets = set(PropositionSet.objects.values_list("dimension", "agent_key"))
    assert ("adherence", "_default") in sets and ("ideas_quantity", "_default") in sets
    assert PropositionSet.objects.get(dimension="ideas_quantity").extra == {"first_n": 10, "last_n": 100}


def test_the_harness_runs_end_to_end_on_such_files_with_the_offline_judge(tree):
    baselines = tree / "baselines"
    baselines.mkdir()
    # The other harness's shape; ideas_quantity far above what rex can reach, so the gate must see it.
    (baselines / "rex.json").write_text(
        json.dumps(
            {
                "agentId": "rex",
                "capturedAt": "2026-10-01T00:00:00Z",
                "dimensions": {
                    "adherence": 0.5,
                    "consistency": 0.5,
                    "fluency": 0.5,
                    "convergence": 0.5,
                    "ideas_quantity": 9,
                },
                "propositionScores": {"ideas_quantity": {"many-ideas": 9}, "stays-in-character": 0},
            }
        )
    )
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(
            "drift_run", "--mode", "synthetic", "--agents", "rex,ivy", "--judge", "offline", "--rounds", "3",
            "--baselines", str(baselines), "--markdown", str(tree / "d.md"), "--junit", str(tree / "d.xml"),
            "--force", stdout=out,
        )  # fmt: skip
    # That shape records no judge, rubric or window: compared only when forced, and labelled so.
    assert "rex/ideas_quantity" in str(caught.value) and "rex/ideas_quantity/many-ideas" in str(caught.value)
    run = EvaluationRun.objects.get(agent_id="rex")
    assert run.drift.dimensions == ["adherence", "consistency", "fluency", "convergence", "ideas_quantity"]
    score = DimensionScore.objects.get(run=run, dimension="ideas_quantity").score
    assert 0 <= score <= 9
    table = (tree / "d.md").read_text()
    assert f"| rex | ideas_quantity | offline/offline-rules-v1 | 9.00 | {score:.2f} |" in table
    assert "| rex | adherence/stays-in-character |" in table
    assert "- rex: the baseline does not record which judge scored it" in table
    cases = {c.get("name") for c in ET.parse(tree / "d.xml").getroot().iter("testcase")}
    assert {"ideas_quantity [forced comparison]", "ideas_quantity/many-ideas [forced comparison]"} <= cases
    inverted = PropositionScore.objects.get(evaluation_run=run, proposition_id="repeats-one-idea")
    assert "inverted" in inverted.reasoning


def test_a_baseline_naming_another_agent_is_refused(tree):
    baselines = tree / "baselines"
    baselines.mkdir()
    (baselines / "rex.json").write_text(json.dumps({"agentId": "ivy", "dimensions": {"adherence": 5}}))
    with pytest.raises(CommandError, match=r"rex.json: agentId: 'ivy' does not match the file name \(rex\)"):
        call_command(
            "drift_run", "--agents", "rex", "--judge", "offline", "--baselines", str(baselines), stdout=StringIO()
        )


def test_a_dimension_with_no_messages_is_unscored_not_nine(db):
    agent = Agent.objects.create(id="quiet", display_name="Quiet", kind="character", persona_spec="Says little.")
    pset = PropositionSet.objects.create(dimension="fluency", agent_key="_default")
    pset.propositions.create(proposition_id="varied", claim="{{agent_name}} varies", weight=1)
    run = drift_evaluate(agent=agent, dimensions=["fluency"], judge="offline")
    assert run.status == "completed" and run.drift.messages_judged == 0
    assert not DimensionScore.objects.filter(run=run).exists()
    assert PropositionScore.objects.get(evaluation_run=run).score is None


def test_the_character_prompt_takes_its_setting_from_the_cast(catalog):
    rex = Agent.objects.get(pk="rex")
    assert "Hollow Lane community garden committee" in system_prompt(rex, {})
    stranger = Agent.objects.create(id="captain", display_name="Captain", kind="character", persona_spec="A ship's captain.",
                                    extra={"setting": "the crew of the freighter Osprey"})  # fmt: skip
    prompt = system_prompt(stranger, {})
    assert "the crew of the freighter Osprey" in prompt and "garden" not in prompt
    plain = Agent.objects.create(id="plain", display_name="Plain", kind="character", persona_spec="Plain.")
    assert "garden" not in system_prompt(plain, {})


def test_an_offline_character_without_sample_lines_speaks_varied_lines_from_its_description():
    description = "A ship's captain who worries about fuel, weather, cargo schedules and the morale of the crew."
    rng = random.Random(3)
    lines = [offline_character(CharacterRule("Captain", (), turn, description=description), rng) for turn in range(6)]
    assert len(set(lines)) >= 5, lines
    assert all("nothing to add" not in line for line in lines)
    words = {"fuel", "weather", "cargo", "schedules", "morale", "crew", "ship", "worries", "captain"}
    assert all(any(w in line.lower() for w in words) for line in lines), lines


def test_synthetic_mode_for_a_cast_member_without_sample_lines(catalog):
    Agent.objects.filter(pk="rex").update(extra={"setting": "the committee"})
    with pytest.raises(CommandError, match="nothing was compared: no baseline for rex"):
        call_command("drift_run", "--mode", "synthetic", "--agents", "rex", "--judge", "offline", "--rounds", "4",
                     "--baselines", "/nonexistent", stdout=StringIO())  # fmt: skip
    texts = list(AgentMessage.objects.filter(source="synthetic", agent_id="rex").values_list("text", flat=True))
    assert len(texts) == 4 and len(set(texts)) >= 3, texts
    assert all("has nothing to add" not in t for t in texts)
