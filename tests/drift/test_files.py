"""Proposition files, cast files and ingest records: one validation style (JSON Schema in the repo for
files, a DRF serializer for records), each problem naming the file or record, the path and the reason."""

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from evaluation.catalog import catalog_load
from evaluation.drift import services
from evaluation.errors import InvalidInput
from evaluation.models import AgentMessage, PropositionSet

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["propositions/schema.json", "cast/schema.json"])
def test_the_schemas_in_the_repo_are_valid_json_schema(path):
    Draft202012Validator.check_schema(json.loads((ROOT / path).read_text()))


def load_propositions(tmp_path, name, text):
    folder = tmp_path / "propositions" / "adherence"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return catalog_load(personas_dir=None, topics_dir=None, propositions_dir=tmp_path / "propositions")


def relative(lines, tmp_path):
    """Files outside the project are named by their absolute path: compare from the folder down."""
    return [line.removeprefix(f"{tmp_path}/") for line in lines]


GOOD = """\
# yaml-language-server: $schema=../schema.json
dimension: adherence
agent_id: rex
propositions:
  - id: terse
    claim: "{{agent_name}} is terse"
    weight: 0.5
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.replace("weight: 0.5", "weight: 3"),
            "propositions/adherence/rex.yaml: propositions.0.weight: 3 is out of range (at most 1)",
        ),
        (
            GOOD.replace("weight: 0.5", "weight: heavy"),
            "propositions/adherence/rex.yaml: propositions.0.weight: 'heavy' should be of type number",
        ),
        (
            GOOD.replace("    weight: 0.5\n", "    inverted: maybe\n"),
            "propositions/adherence/rex.yaml: propositions.0.inverted: 'maybe' should be of type boolean",
        ),
        (
            GOOD.replace("  - id: terse\n", "  - name: terse\n"),
            "propositions/adherence/rex.yaml: propositions.0.id: is required",
        ),
        (
            GOOD.split("propositions:")[0] + "propositions: []\n",
            "propositions/adherence/rex.yaml: propositions: [] should be non-empty",
        ),
        (
            "- just\n- a list\n",
            "propositions/adherence/rex.yaml: (document): ['just', 'a list'] should be of type object",
        ),
        (
            GOOD + "  - id: terse\n    claim: again\n",
            "propositions/adherence/rex.yaml: propositions.1.id: 'terse' is used twice in this file",
        ),
    ],
    ids=["range", "type", "boolean", "required", "empty", "document", "duplicate-id"],
)
def test_a_bad_proposition_file_names_file_path_and_reason(tmp_path, text, expected):
    report = load_propositions(tmp_path, "rex.yaml", text)
    # Files outside the project are named by their absolute path.
    assert relative(report.errors, tmp_path) == [expected]
    assert not PropositionSet.objects.exists()


def test_unknown_keys_and_template_variables_are_kept_with_a_warning(tmp_path):
    text = GOOD.replace("    weight: 0.5\n", "    weight: 0.5\n    notes: keep me\n").replace(
        "{{agent_name}} is terse", "{{agent_name}} is terse in {{channel}}"
    )
    report = load_propositions(tmp_path, "rex.yaml", "owner: team-a\n" + text)
    assert report.ok, report.errors
    assert relative(report.warnings, tmp_path) == [
        "propositions/adherence/rex.yaml: propositions.0: unknown key 'notes' kept",
        "propositions/adherence/rex.yaml: propositions.0.claim: unknown template variable(s) channel "
        "(known: agent_name, channel_name, recipient_name); the judge would see them as written",
        "propositions/adherence/rex.yaml: unknown key 'owner' kept",
    ]
    pset = PropositionSet.objects.get()
    assert pset.extra == {"owner": "team-a"} and pset.propositions.get().extra == {"notes": "keep me"}


CAST = {"id": "rex", "display_name": "Rex", "persona_spec": "A blunt handyman.", "setting": "the garden committee"}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"display_name": ""}, "cast/rex.yaml: display_name: '' should be non-empty"),
        ({"persona_spec": None}, "cast/rex.yaml: persona_spec: None should be of type string"),
        ({"id": "rex smith"}, "cast/rex.yaml: id: 'rex smith' does not match '^[A-Za-z0-9_.-]+$'"),
        ({"sample_lines": "one line"}, "cast/rex.yaml: sample_lines: 'one line' should be of type array"),
    ],
)
def test_a_bad_cast_file_names_file_path_and_reason(change, expected):
    member, problems = services.parse_cast({**CAST, **change}, file="cast/rex.yaml")
    assert member is None and [str(p) for p in problems] == [expected]


def test_a_cast_file_missing_a_key_and_one_with_unknown_keys():
    data = {k: v for k, v in CAST.items() if k != "persona_spec"}
    _, problems = services.parse_cast(data, file="cast/rex.yaml")
    assert [str(p) for p in problems] == ["cast/rex.yaml: persona_spec: is required"]
    member, problems = services.parse_cast({**CAST, "favourite_tool": "spanner"}, file="cast/rex.yaml")
    assert not problems and member is not None
    assert member.extra == {"setting": "the garden committee", "favourite_tool": "spanner"}
    assert member.warnings == ("cast/rex.yaml: unknown key 'favourite_tool' kept",)


def test_every_shipped_cast_file_is_valid():
    for path in sorted((ROOT / "cast").glob("*.yaml")):
        member, problems = services.parse_cast(yaml.safe_load(path.read_text()), file=path.name)
        assert member is not None and not problems and not member.warnings, (path, problems)


def test_ingest_records_are_checked_by_one_serializer_with_an_error_per_record(catalog):
    body = "\n".join(
        json.dumps(r)
        for r in (
            {"agent": "rex", "channel": "general", "text": "Fine."},
            {"agent": "nobody", "channel": "general", "text": "Hi."},
            {"agent": "rex", "channel": "", "text": "Hi.", "time": "yesterday"},
            "just a string",
        )
    )
    with pytest.raises(InvalidInput) as caught:
        services.messages_ingest_body(body)
    assert [str(p) for p in caught.value.problems] == [
        "line 2.agent: no agent 'nobody'",
        "line 3.channel: This field may not be blank.",
        "line 3.time: Datetime has wrong format. Use one of these formats instead: "
        "YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].",
        "line 4: Invalid data. Expected a dictionary, but got str.",
    ]
    assert not AgentMessage.objects.exists()
    stored = services.messages_ingest_body(
        json.dumps([{"agent": "rex", "channel": "#general", "text": "Fine.", "time": "2026-11-01T10:00:00"}])
    )
    assert stored[0].channel == "general" and stored[0].created_at.isoformat() == "2026-11-01T10:00:00+00:00"


def test_loading_a_team_default_file_says_what_it_replaces(catalog):
    parsed, problems = services.parse_proposition_yaml(
        "propositions:\n  - id: team-claim\n    claim: '{{agent_name}} is kind'\n", file="team/adherence/_default.yaml"
    )
    assert not problems and (parsed.dimension, parsed.agent_id) == ("adherence", "_default")
    replaced = services.proposition_set_replacement(parsed, file="team/adherence/_default.yaml")
    assert replaced is not None and replaced.previous_file == "propositions/adherence/_default.yaml"
    assert replaced.dropped == ("default-channel-appropriate", "default-in-character", "default-no-assistant-voice")
    assert str(replaced).startswith("replaces adherence/_default from propositions/adherence/_default.yaml; drops ")
    shipped = (ROOT / "propositions" / "adherence" / "_default.yaml").read_text()
    same, _ = services.parse_proposition_yaml(shipped, file="propositions/adherence/_default.yaml")
    assert services.proposition_set_replacement(same, file="propositions/adherence/_default.yaml") is None
