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
