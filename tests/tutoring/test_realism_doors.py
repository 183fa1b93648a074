"""The realism card through every door: manage.py realism (persona sets, an imported set, --fit, --next-turn,
--build-reference), the Bridge import format, GET /api/tutoring/realism, the dashboard page, the persona's admin
page, a run's review.md and report page, and a comparison's note beside its verdict. Runs and transcripts are
hand-made; the reference is the shipped Bridge table."""

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from evaluation.models import EvaluationRun, Persona, RunMessage, Transcript
from evaluation.tutoring import reports, selectors
from evaluation.tutoring.next_turn import rouge_l, score_turn

CHATTY = (
    "Well, I think that if we add the two fractions together we get five eighths because the denominators are the "
    "same and so we only add the numerators, which gives us five over eight as the final answer."
)
SIMULATOR = {"llm": {"simulator": {"provider": "openai", "model": "chatty-1"}}}


def make_runs(persona_id: str, n: int, student: str, *, group: str = "", config=SIMULATOR) -> list[EvaluationRun]:
    persona = Persona.objects.get(persona_id=persona_id)
    now = timezone.now()
    made = []
    for i in range(n):
        run = EvaluationRun.objects.create(
            run_id=f"run_{persona_id}_{group or 'x'}_{i}",
            status="completed",
            stage="completed",
            persona=persona,
            group=group,
            config=config,
            completed_at=now - timedelta(minutes=i),
        )
        for turn in range(1, 5):
            RunMessage.objects.create(
                run=run, turn=2 * turn - 1, role="tutor", content="What is 3/8 + 2/8?", timestamp=now
            )
            RunMessage.objects.create(run=run, turn=2 * turn, role="student", content=student, timestamp=now)
        made.append(run)
    return made


def bridge_file(tmp_path: Path, n: int = 8) -> Path:
    """Records in Bridge's shape, written here (not Bridge's own text)."""
    records = []
    for i in range(n):
        records.append(
            {
                "c_id": f"ex_{i}",
                "lesson_topic": "Adding fractions",
                "c_h": [
                    {"id": 1, "text": "What is 1/4 + 2/4?", "time": "1:00", "user": "tutor"},
                    {"id": 2, "text": "3/4" if i % 2 else "ok", "time": "1:01", "user": "student"},
                    {"id": 3, "text": "And 1/5 + 1/5?", "time": "1:02", "user": "tutor"},
                    {"id": 4, "text": "2/5", "time": "1:03", "user": "student"},
                    {"id": 5, "text": "Why does the bottom stay?", "time": "1:04", "user": "tutor"},
                    {"id": 6, "text": "idk", "time": "1:05", "user": "student"},
                ],
                "c_r": [{"id": 7, "text": "Good try!", "time": "1:06", "user": "tutor"}],
                "c_r_": [{"user": "tutor", "text": "an expert's revision", "is_revised": True}],
                "e": "guess",
                "z_what": "explain_concept",
                "z_why": "clarify_misunderstanding",
            }
        )
    path = tmp_path / "test.json"
    path.write_text(json.dumps(records))
    return path


def run_command(*args: str) -> str:
    out = StringIO()
    call_command("realism", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def chatty_runs(catalog):
    return make_runs("ace", 6, CHATTY) + make_runs("struggler", 2, "5/8")


@pytest.mark.django_db
def test_command_cards_every_persona_against_bridge(chatty_runs):
    data = json.loads(run_command("--reference", "bridge", "--persona", "all", "--json"))
    assert data["reference"] == "bridge"
    sets = {s["name"]: s for s in data["sets"]}
    assert set(sets) == {"ace (openai/chatty-1)", "struggler (openai/chatty-1)"}
    ace = sets["ace (openai/chatty-1)"]
    assert ace["turns"] == 24 and ace["dialogues"] == 6 and ace["unrealistic"] is True
    words = next(m for m in ace["measures"] if m["name"] == "words_per_turn")
    assert words["value"] == 38 and words["reference_value"] == 1.0 and words["flag"] is True
    assert len(words["interval"]) == 2 and len(words["reference_interval"]) == 2
    assert "student turns 38.0x longer than real students'" in words["note"]
    names = {m["name"] for m in ace["measures"]}
    assert {"question_rate", "acknowledgement_rate", "act_distribution", "lexical_diversity"} <= names
    assert sets["struggler (openai/chatty-1)"]["unrealistic"] is None  # two runs: not judged, and says why
    assert "at least 5" in sets["struggler (openai/chatty-1)"]["notes"][0]
    text = run_command("--persona", "ace")
    assert "[FLAG] words_per_turn: 38.0" in text
    with pytest.raises(CommandError, match="no persona 'nobody'"):
        run_command("--persona", "nobody")
    with pytest.raises(CommandError, match="selects no dialogue"):
        run_command("--reference", "bridge:nosuch")


@pytest.mark.django_db
def test_bridge_files_import_and_card_as_a_set(catalog, tmp_path):
    out = StringIO()
    call_command("import_transcripts", str(bridge_file(tmp_path)), "--format", "bridge", stdout=out)
    stored = Transcript.objects.get(source="bridge", external_id="ex_1")
    assert [m["role"] for m in stored.messages] == ["tutor", "student", "tutor", "student", "tutor", "student", "tutor"]
    assert "an expert's revision" not in json.dumps(stored.messages)  # the revision is not the real conversation
    assert stored.metadata == {
        "format": "bridge",
        "lesson_topic": "Adding fractions",
        "e": "guess",
        "z_what": "explain_concept",
        "z_why": "clarify_misunderstanding",
    }
    data = json.loads(run_command("--reference", "bridge", "--transcripts", "imported:bridge", "--json"))
    card = data["sets"][0]
    assert card["name"] == "bridge" and card["turns"] == 24 and card["dialogues"] == 8
    # the side under test is the imported set by its source name, though a shipped table is called bridge too
    plain = json.loads(run_command("--reference", "bridge", "--transcripts", "bridge", "--json"))["sets"][0]
    assert (plain["turns"], plain["dialogues"]) == (24, 8)
    ack = next(m for m in card["measures"] if m["name"] == "acknowledgement_rate")
    assert ack["value"] == pytest.approx(4 / 24, abs=1e-4)
    with pytest.raises(CommandError, match="no imported transcripts of source 'nothing'"):
        run_command("--transcripts", "nothing")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"c_id": "x", "c_h": "not a list"}]))
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("import_transcripts", str(bad), "--format", "bridge", stderr=err)
    assert "record 0 (c_id 'x').c_h" in err.getvalue() and "is required: a list of" in err.getvalue()


@pytest.mark.django_db
def test_build_reference_writes_a_table_of_measures_without_text(catalog, tmp_path):
    path = bridge_file(tmp_path, n=3)
    out = tmp_path / "table.csv"
    text = run_command("--build-reference", str(path), "--out", str(out))
    assert "3 dialogue(s), 9 student turn(s)" in text
    table = out.read_text()
    assert table.splitlines()[0].startswith("dialogue,splits,error,words")
    assert "ex_0,test,guess,1,2,0,0,,1,0,0,0,acknowledgement" in table
    assert "idk" not in table and "1/4" not in table  # measures only, no dialogue text


@pytest.mark.django_db
def test_fit_proposes_grounding_and_saves_it(chatty_runs):
    data = json.loads(run_command("--fit", "ace", "--reference", "bridge:error=guess", "--json", "--save"))
    assert data["grounding"]["verbosity"] == 1 and data["grounding"]["source"] == "bridge:error=guess"
    assert data["before"][0]["unrealistic"] is True
    assert Persona.objects.get(persona_id="ace").grounding == data["grounding"]


@pytest.mark.django_db
def test_next_turn_tests_score_the_simulator_against_the_real_turns(catalog, tmp_path):
    call_command("import_transcripts", str(bridge_file(tmp_path, n=2)), "--format", "bridge", stdout=StringIO())
    out = run_command(
        "--next-turn", "--transcripts", "bridge", "--persona", "struggler", "--provider", "offline", "--json"
    )
    report = json.loads(out)["reports"][0]
    assert report["persona"] == "struggler" and report["simulator"].startswith("offline/")
    assert report["turns"] == 6 and 0 <= report["act_agreement"] <= 1
    with pytest.raises(CommandError, match="needs --transcripts"):
        run_command("--next-turn")


def test_next_turn_scores_by_hand():
    assert rouge_l("is it 5/8", "it is 5/8") == pytest.approx(2 / 3)  # LCS "it 5/8" (or "is 5/8"): 2 of 3
    assert rouge_l("ok", "3/4") == 0.0
    s = score_turn("d", 1, "3/4", "I think the answer is 3/4 because", True)
    assert s.act_real == s.act_simulated == "answer_attempt" and s.same_act and s.same_attempt
    assert s.length_gap == pytest.approx(1.3863, abs=1e-4)  # |log(8/2)|
    assert not score_turn("d", 1, "ok", "3/4", True).same_attempt


@pytest.mark.django_db
def test_api_page_and_admin_show_the_cards(chatty_runs, staff_client, staff_user):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    got = api.get("/api/tutoring/realism", {"persona": "ace", "reference": "bridge"})
    assert got.status_code == 200, got.content
    card = got.json()["sets"][0]
    assert card["unrealistic"] is True and card["measures"][0]["name"] == "words_per_turn"
    assert api.get("/api/tutoring/realism", {"persona": "nobody"}).status_code == 404
    assert api.get("/api/tutoring/realism", {"reference": "bridge:nosuch"}).status_code == 400
    assert api.get("/api/tutoring/realism?persona=ace&persona=ace").status_code == 400
    assert APIClient().get("/api/tutoring/realism").status_code == 401
    page = staff_client.get("/admin/evaluation/realism/", {"persona": "ace"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "ace (openai/chatty-1)" in html and "<b>Unrealistic</b>" in html and 'data-name="words_per_turn"' in html
    assert staff_client.get("/admin/evaluation/realism/", {"transcripts": "nothing"}).status_code == 400
    admin_page = staff_client.get(f"/admin/evaluation/persona/{Persona.objects.get(persona_id='ace').pk}/change/")
    assert admin_page.status_code == 200
    assert "unrealistic against bridge: student turns 38.0x longer" in admin_page.content.decode()


@pytest.mark.django_db
def test_reports_and_the_comparison_say_the_students_are_unrealistic(chatty_runs, staff_client, tmp_path):
    run = chatty_runs[0]
    note = selectors.run_realism(run)
    assert note["unrealistic"] is True and note["simulator"] == "openai/chatty-1" and note["runs"] == 6
    review = reports.review_markdown(
        {
            "run": {"run_id": run.run_id},
            "evaluation": {
                "judge": "offline/x",
                "scores": {"pacing": 5},
                "avg_score": 5,
                "summary": "s",
                "dimension_analysis": {},
                "problems": [],
                "simulator_realism": note,
            },
        }
    )
    assert "**Warning: these simulated students are unrealistic**" in review
    assert "student turns 38.0x longer than real students'" in review
    grouped = make_runs("ace", 2, CHATTY, group="cmp")
    assert selectors.group_realism_of("cmp")[0]["persona_id"] == "ace"
    data = reports.write_comparison(
        tmp_path, "cmp", selectors.group_runs("cmp"), min_coverage=0.5, realism=selectors.group_realism_of("cmp")
    )
    assert data["realism"][0]["unrealistic"] is True
    assert (
        "The verdict stands, but it rests on simulated students unlike real ones"
        in (tmp_path / "comparison.md").read_text()
    )
    page = staff_client.get(f"/admin/evaluation/runs/{grouped[0].run_id}/")
    assert page.status_code == 200
