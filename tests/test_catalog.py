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
    assert error.startswith(f"{folder / 'broken.json'}")  # a file outside the project is named in full
    assert field in error and reason in error
    assert Persona.objects.filter(persona_id="ace").exists()


def test_bad_json_error_names_the_line(tmp_path):
    folder = persona_dir(tmp_path, broken='{\n  "persona_id": "x",\n  "name": \n}')
    report = load(tmp_path, personas=folder)
    assert report.errors[0].startswith(f"{folder / 'broken.json'}:4: ")


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
    folder = proposition_dir(tmp_path, text)
    report = load(tmp_path, propositions=folder)
    assert len(report.errors) == 1, report.errors
    assert report.errors[0].startswith(f"{folder / 'adherence' / 'broken.yaml'}")
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


def shipped(**kwargs):
    return catalog_load(
        personas_dir=ROOT / "personas",
        topics_dir=ROOT / "topics",
        propositions_dir=ROOT / "propositions",
        cast_dir=ROOT / "cast",
        **kwargs,
    )


def outcomes(report):
    return {f.file: f.outcome for f in report.files}


def test_each_file_says_whether_it_was_created_updated_unchanged_replaced_or_rejected(tmp_path):
    first = shipped()
    assert set(outcomes(first).values()) == {"created"}
    assert outcomes(first)["personas/ace.json"] == "created" and outcomes(first)["cast/rex.yaml"] == "created"
    assert set(outcomes(shipped()).values()) == {"unchanged"}

    # the same file, changed: updated
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "ace.json").write_text(json.dumps(good_persona(persona_id="ace", name="Ace, renamed")))
    (folder / "broken.json").write_text('{"persona_id": ')
    report = catalog_load(personas_dir=folder, topics_dir=None, propositions_dir=None)
    by_file = {f.file: f for f in report.files}
    ace = by_file[str(folder / "ace.json")]
    # another folder's file naming a shipped persona replaces it, and says which file it replaced
    assert ace.outcome == "replaced" and ace.record == "persona ace" and "personas/ace.json" in ace.detail
    assert Persona.objects.get(persona_id="ace").name == "Ace, renamed"
    broken = by_file[str(folder / "broken.json")]
    assert broken.outcome == "rejected" and "invalid JSON" in broken.detail
    (folder / "broken.json").unlink()
    (folder / "ace.json").write_text(json.dumps(good_persona(persona_id="ace", name="Ace, again")))
    assert outcomes(catalog_load(personas_dir=folder, topics_dir=None, propositions_dir=None)) == {
        str(folder / "ace.json"): "updated"
    }


def test_a_proposition_file_replacing_a_shipped_one_says_so(tmp_path):
    shipped()
    folder = tmp_path / "propositions"
    (folder / "adherence").mkdir(parents=True)
    doc = yaml.safe_load((ROOT / "propositions" / "adherence" / "_default.yaml").read_text())
    doc["propositions"] = doc["propositions"][:1]
    (folder / "adherence" / "_default.yaml").write_text(yaml.safe_dump(doc))
    report = catalog_load(personas_dir=None, topics_dir=None, propositions_dir=folder)
    [line] = report.files
    assert line.outcome == "replaced" and line.record == "proposition set adherence/_default"
    assert line.detail == "was loaded from propositions/adherence/_default.yaml"
    assert PropositionSet.objects.get(dimension="adherence", agent_key="_default").propositions.count() == 1


def test_records_edited_in_the_admin_are_kept_and_reported_unless_forced(catalog):
    ace = Persona.objects.get(persona_id="ace")
    ace.description = "Edited by staff."
    ace.save()
    claim = PropositionSet.objects.get(dimension="adherence", agent_key="_default").propositions.first()
    claim.claim = "A claim staff rewrote."
    claim.save()

    out, err = StringIO(), StringIO()
    call_command("load_catalog", stdout=out, stderr=err)  # exit 0: a conflict is not an error
    assert (
        "personas/ace.json: persona ace edited in the admin since it was loaded from personas/ace.json"
        in err.getvalue()
    )
    assert (
        "propositions/adherence/_default.yaml: proposition set adherence/_default edited in the admin" in err.getvalue()
    )
    assert "2 skipped" in out.getvalue() and "--force" in err.getvalue()
    assert Persona.objects.get(persona_id="ace").description == "Edited by staff."
    assert Proposition.objects.filter(claim="A claim staff rewrote.").exists()
    # still the admin's on the next load: the conflict does not go away by itself
    assert outcomes(shipped())["personas/ace.json"] == "skipped"

    out = StringIO()
    call_command("load_catalog", "--force", stdout=out, stderr=StringIO())
    assert "personas/ace.json: updated persona ace (overwrote edits made in the admin (--force))" in out.getvalue()
    assert Persona.objects.get(persona_id="ace").description != "Edited by staff."
    assert not Proposition.objects.filter(claim="A claim staff rewrote.").exists()
    assert set(outcomes(shipped()).values()) == {"unchanged"}


def test_a_record_made_in_the_admin_is_not_overwritten_by_a_file_naming_it(db):
    Persona.objects.create(
        persona_id="ace",
        name="Staff's ace",
        grade=4,
        description="Made in the admin.",
        correct_answer_probability=0.5,
        response_style={"max_words": 10},
    )
    report = catalog_load(personas_dir=ROOT / "personas", topics_dir=None, propositions_dir=None)
    line = next(f for f in report.files if f.file == "personas/ace.json")
    assert line.outcome == "skipped" and "made in the admin" in line.detail
    assert Persona.objects.get(persona_id="ace").name == "Staff's ace"
    assert report.ok
