"""Grounded personas, before and after: --fit cards the persona's runs as played, their tutor turns answered by the
offline student as grounded now, and the same answered with the proposed grounding, against the same reference
subset; and a persona's runs are carded apart per simulator model (the model each run recorded)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import Persona
from evaluation.tutoring import selectors
from tests.tutoring.test_realism_doors import CHATTY, make_runs

TERSE = {"llm": {"simulator": {"provider": "openai", "model": "terse-1"}}}


def run(*args: str) -> str:
    out = StringIO()
    call_command("realism", *args, stdout=out)
    return out.getvalue()


def measure(card: dict, name: str) -> dict:
    return next(m for m in card["measures"] if m["name"] == name)


@pytest.mark.django_db
def test_fit_shows_the_card_before_and_after_against_the_same_reference(catalog):
    make_runs("ace", 6, CHATTY)
    data = json.loads(run("--fit", "ace", "--reference", "bridge:error=guess", "--json"))
    assert data["grounding"]["source"] == "bridge:error=guess" and data["saved"] is False
    (before,) = data["before"]
    replayed, after = data["replayed_before"], data["after"]
    for card in (before, replayed, after):
        assert card["reference"] == "bridge:error=guess" and card["dialogues"] == 6 and card["turns"] == 24
    assert before["name"] == "ace (openai/chatty-1)" and measure(before, "words_per_turn")["flag"] is True
    assert after["name"] == "ace (offline, grounding proposed)"
    assert replayed["name"] == "ace (offline, grounding now)"
    # The proposal's terse students: the median words of a turn is the proposal's verbosity or near it.
    words = measure(after, "words_per_turn")
    assert words["flag"] is False and words["value"] <= data["grounding"]["verbosity"] + 2
    # The after's acknowledgement share follows the proposal's (about a fifth of Bridge's guessers' turns), not
    # the chatty runs' (none).
    assert measure(before, "acknowledgement_rate")["value"] == 0.0
    assert measure(after, "acknowledgement_rate")["value"] > 0
    assert Persona.objects.get(persona_id="ace").grounding != data["grounding"]  # not saved without --save
    text = run("--fit", "ace", "--reference", "bridge:error=guess")
    assert "Before, the runs as played:" in text and "After, the same tutor turns" in text
    assert "ace (offline, grounding proposed): 6 dialogue(s), 24 student turn(s)" in text


@pytest.mark.django_db
def test_fit_without_runs_says_so_and_an_unknown_persona_fails(catalog):
    text = run("--fit", "struggler", "--reference", "bridge")
    assert "No completed simulated runs yet: no card before or after" in text
    data = json.loads(run("--fit", "struggler", "--json"))
    assert data["after"] is None and data["before"] == [] and data["grounding"]["verbosity"] == 1
    with pytest.raises(CommandError, match="no persona 'nobody'"):
        run("--fit", "nobody")


@pytest.mark.django_db
def test_a_personas_runs_are_carded_per_simulator_model(catalog):
    make_runs("ace", 6, CHATTY, group="a")
    make_runs("ace", 6, "5/8", group="b", config=TERSE)
    sets = {s["name"]: s for s in json.loads(run("--persona", "ace", "--json"))["sets"]}
    assert set(sets) == {"ace (openai/chatty-1)", "ace (openai/terse-1)"}
    assert sets["ace (openai/chatty-1)"]["dialogues"] == sets["ace (openai/terse-1)"]["dialogues"] == 6
    assert measure(sets["ace (openai/chatty-1)"], "words_per_turn")["flag"] is True
    assert measure(sets["ace (openai/terse-1)"], "words_per_turn")["flag"] is False
    chatty = selectors.realism_note("ace", "openai/chatty-1")
    terse = selectors.realism_note("ace", "openai/terse-1")
    assert chatty["unrealistic"] is True and chatty["runs"] == 6
    assert terse["simulator"] == "openai/terse-1" and terse["runs"] == 6
    assert not any("longer than real students'" in n for n in terse["notes"])


# --- the note beside a comparison's verdict, at every door, and what keeps it cheap -----------------------------


@pytest.mark.django_db
def test_the_apis_comparison_carries_the_realism_note_beside_the_verdict(catalog, staff_user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    make_runs("ace", 6, CHATTY)
    make_runs("ace", 2, CHATTY, group="cmp")
    make_runs("struggler", 2, "5/8", group="cmp", config=TERSE)  # too few runs to judge: no note
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    got = api.get("/api/evaluation/comparisons/cmp")
    assert got.status_code == 200, got.content
    data = got.json()
    assert "gate" in data
    (note,) = data["realism"]
    assert (note["persona_id"], note["simulator"], note["reference"], note["runs"]) == (
        "ace",
        "openai/chatty-1",
        "bridge",
        8,
    )
    assert note["unrealistic"] is True and "student turns" in note["notes"][0] and note["summary"]
    realistic = make_runs("struggler", 2, "5/8", group="plain", config=TERSE)
    assert api.get(f"/api/evaluation/comparisons/{realistic[0].group}").json()["realism"] == []


@pytest.mark.django_db
def test_a_note_is_worked_out_once_and_read_by_every_process_until_a_run_completes(catalog, settings, tmp_path):
    from evaluation.models import RunMessage
    from evaluation.tutoring import realism_sets

    settings.EVALUATION = {**settings.EVALUATION, "RUNS_DIR": str(tmp_path)}
    runs = make_runs("ace", 6, CHATTY)
    realism_sets._NOTES.clear()
    first = selectors.realism_note("ace", "openai/chatty-1")
    assert first["unrealistic"] is True
    assert len(list((tmp_path / realism_sets.NOTES_FOLDER).glob("*.json"))) == 1
    # Another process (nothing kept in memory) reads the file: the stored turns changed under it, unseen.
    RunMessage.objects.filter(role="student").update(content="5/8")
    realism_sets._NOTES.clear()
    assert selectors.realism_note("ace", "openai/chatty-1") == first
    # Without the file, the note is worked out again from the runs as they are now.
    for path in (tmp_path / realism_sets.NOTES_FOLDER).glob("*.json"):
        path.unlink()
    realism_sets._NOTES.clear()
    terse = selectors.realism_note("ace", "openai/chatty-1")
    assert not any("longer than real students'" in n for n in terse["notes"])
    # A run of the persona that completes makes a new note (a new signature), file or not.
    RunMessage.objects.filter(role="student").update(content=CHATTY)
    make_runs("ace", 1, CHATTY, group="later")
    assert selectors.realism_note("ace", "openai/chatty-1")["runs"] == 7
    assert runs


def test_a_note_card_without_its_shown_intervals_has_the_full_cards_figures_and_flags():
    from evaluation.tutoring import realism

    held_out, rest = realism.builtin_corpus("bridge:test"), realism.builtin_corpus("bridge:not-test")
    chatty = realism.Corpus(
        "chatty",
        tuple(
            realism.measure_messages([("tutor", "What is 3/8 + 2/8?"), ("student", CHATTY)] * 4, f"d{i}")
            for i in range(8)
        ),
    )
    for corpus in (held_out, chatty):
        full = realism.realism_card(corpus, rest)
        bare = realism.realism_card(corpus, rest, intervals=False)
        assert (bare.unrealistic, bare.notes) == (full.unrealistic, full.notes)
        for a, b in zip(full.measures, bare.measures, strict=True):
            assert (a.name, a.value, a.distance, a.distance_interval, a.flag, a.rule, a.note) == (
                b.name,
                b.value,
                b.distance,
                b.distance_interval,
                b.flag,
                b.rule,
                b.note,
            )
            assert b.interval is None and b.reference_interval is None


@pytest.mark.django_db
def test_old_note_files_are_let_go_once_the_folder_is_full(catalog, settings, tmp_path):
    import os

    from evaluation.tutoring import realism_sets

    settings.EVALUATION = {**settings.EVALUATION, "RUNS_DIR": str(tmp_path)}
    folder = tmp_path / realism_sets.NOTES_FOLDER
    folder.mkdir()
    for i in range(realism_sets.NOTE_FILES_KEPT):
        old = folder / f"old{i}.json"
        old.write_text('{"note": null}')
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    make_runs("ace", 6, CHATTY)
    realism_sets._NOTES.clear()
    assert selectors.realism_note("ace", "openai/chatty-1")["unrealistic"] is True
    left = {p.name for p in folder.glob("*.json")}
    assert len(left) == realism_sets.NOTE_FILES_KEPT // 2 + 1
    assert "old0.json" not in left and f"old{realism_sets.NOTE_FILES_KEPT - 1}.json" in left
