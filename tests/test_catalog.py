"""Loading persona, topic and proposition files: shipped files, malformed files, round trips."""

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from evaluation.catalog import catalog_load
from evaluation.models import Persona, Proposition, PropositionSet, Topic

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


def load(tmp_path, personas=None, propositions=None):
    return catalog_load(personas_dir=personas, topics_dir=None, propositions_dir=propositions)


def test_shipped_files_load_and_reload_idempotently(catalog):
    assert Persona.objects.count() == 8
    assert set(Persona.objects.values_list("persona_id", flat=True)) == {
        "ace",
        "average_student",
        "confused_confident",
        "distractor",
        "quiet_one",
        "repetition_detector",
        "simplicity_seeker",
        "struggler",
    }
    assert Topic.objects.filter(approved=True).count() >= 3
    assert set(PropositionSet.objects.values_list("dimension", flat=True)) == {
        "adherence",
        "consistency",
        "fluency",
        "convergence",
    }
    before = Proposition.objects.count()
    report = catalog_load(
        personas_dir=ROOT / "personas", topics_dir=ROOT / "topics", propositions_dir=ROOT / "propositions"
    )
    assert report.ok and Persona.objects.count() == 8 and Proposition.objects.count() == before
    ace = Persona.objects.get(persona_id="ace")
    assert ace.correct_answer_probability == 0.9 and ace.response_style["max_words"] == 25


def persona_dir(tmp_path, **files):
    folder = tmp_path / "personas"
    folder.mkdir()
    shutil.copy(ROOT / "personas" / "schema.json", folder / "schema.json")
    shutil.copy(ROOT / "personas" / "ace.json", folder / "ace.json")
    for name, text in files.items():
        (folder / f"{name}.json").write_text(text)
    return folder


def good_persona(**changes):
    data = json.loads((ROOT / "personas" / "struggler.json").read_text())
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ('{"persona_id": "x", "name": ', "", "invalid JSON"),
        (
            json.dumps(good_persona(correct_answer_probability=1.7)),
            "correct_answer_probability",
            "1.7 is out of range (at most 1)",
        ),
        (json.dumps({k: v for k, v in good_persona().items() if k != "name"}), "name", "is required"),
        (json.dumps(good_persona(response_style={"language": "en"})), "response_style.max_words", "is required"),
    ],
    ids=["bad-json", "probability-1.7", "missing-name", "style-without-max-words"],
)
def test_malformed_persona_is_reported_and_the_others_still_load(tmp_path, text, field, reason):
    folder = persona_dir(tmp_path, broken=text)
    report = load(tmp_path, personas=folder)
    assert len(report.errors) == 1, report.errors
    error = report.errors[0]
    assert error.startswith("personas/broken.json")
    assert field in error and reason in error
    assert Persona.objects.filter(persona_id="ace").exists()


def test_bad_json_error_names_the_line(tmp_path):
    folder = persona_dir(tmp_path, broken='{\n  "persona_id": "x",\n  "name": \n}')
    report = load(tmp_path, personas=folder)
    assert report.errors[0].startswith("personas/broken.json:4: ")


def test_a_bad_file_loses_nothing_already_stored(tmp_path, catalog):
    folder = persona_dir(tmp_path, struggler=json.dumps(good_persona(correct_answer_probability=-0.2)))
    report = load(tmp_path, personas=folder)
    assert not report.ok
    assert Persona.objects.get(persona_id="struggler").correct_answer_probability == 0.3


def test_unknown_persona_keys_are_kept_with_a_warning(tmp_path):
    folder = persona_dir(
        tmp_path, extra=json.dumps(good_persona(persona_id="extra", favourite_subject="art", voice={"pitch": "high"}))
    )
    report = load(tmp_path, personas=folder)
    assert report.ok
    assert any("unknown key 'favourite_subject' kept" in w for w in report.warnings)
    assert Persona.objects.get(persona_id="extra").extra == {"favourite_subject": "art", "voice": {"pitch": "high"}}


def proposition_dir(tmp_path, text):
    folder = tmp_path / "propositions"
    shutil.copytree(ROOT / "propositions", folder)
    (folder / "adherence" / "broken.yaml").write_text(text)
    return folder


VALID_PROPOSITIONS = """\
dimension: adherence
agent_id: broken
propositions:
  - id: p1
    claim: "{{agent_name}} is terse"
    weight: 0.5
"""


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("dimension: adherence\nagent_id: [unclosed\n", "propositions/adherence/broken.yaml:3: invalid YAML"),
        (
            VALID_PROPOSITIONS.replace("weight: 0.5", "weight: 3"),
            "propositions.0.weight: 3 is out of range (at most 1)",
        ),
        (
            VALID_PROPOSITIONS.replace("dimension: adherence", "dimension: Charisma Points"),
            "dimension: 'Charisma Points' does not match",
        ),
        (
            VALID_PROPOSITIONS.replace('    claim: "{{agent_name}} is terse"\n', ""),
            "propositions.0.claim: is required",
        ),
    ],
    ids=["bad-yaml", "weight-3", "bad-dimension-name", "missing-claim"],
)
def test_malformed_proposition_file_is_reported_and_the_others_still_load(tmp_path, text, needle):
    report = load(tmp_path, propositions=proposition_dir(tmp_path, text))
    assert len(report.errors) == 1, report.errors
    assert report.errors[0].startswith("propositions/adherence/broken.yaml")
    assert needle in report.errors[0]
    assert PropositionSet.objects.count() == len(list((ROOT / "propositions").glob("*/*.yaml")))


def test_command_exits_non_zero_naming_the_file(tmp_path):
    folder = persona_dir(tmp_path, broken=json.dumps(good_persona(correct_answer_probability=1.7)))
    err = StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("load_catalog", "--only", "personas", "--personas", str(folder), stderr=err, stdout=StringIO())
    assert "personas/broken.json: correct_answer_probability" in err.getvalue()
    assert Persona.objects.filter(persona_id="ace").exists()


def read_tree(folder: Path):
    data = {}
    for path in folder.rglob("*"):
        if path.is_file() and path.name != "schema.json":
            text = path.read_text()
            data[str(path.relative_to(folder))] = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return data


def test_round_trip_file_db_file_is_lossless_unknown_keys_included(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT / "personas", source / "personas")
    shutil.copytree(ROOT / "topics", source / "topics")
    shutil.copytree(ROOT / "propositions", source / "propositions")
    shutil.copytree(ROOT / "cast", source / "cast")
    (source / "cast" / "messages.jsonl").unlink()  # messages are data, not catalogue
    persona = good_persona(persona_id="wild", hobbies=["chess"], notes={"author": "x"})
    (source / "personas" / "wild.json").write_text(json.dumps(persona))
    props = yaml.safe_load(VALID_PROPOSITIONS)
    props["hard_variants"] = ["x"]
    props["propositions"][0]["notes_for_improvement"] = "be kinder"
    props["propositions"][0]["last_n"] = 5
    (source / "propositions" / "adherence" / "wild.yaml").write_text(yaml.safe_dump({**props, "agent_id": "wild"}))

    report = catalog_load(
        personas_dir=source / "personas",
        topics_dir=source / "topics",
        propositions_dir=source / "propositions",
        cast_dir=source / "cast",
    )
    assert report.ok, report.errors
    out = tmp_path / "out"
    call_command("export_catalog", str(out), stdout=StringIO())
    assert read_tree(out) == read_tree(source)
