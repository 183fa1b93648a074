"""Real labelled files as they are: a public benchmark's own label spellings, ids repeated with other candidates,
wordings that need a map, invalid records set aside on request, and text no column can hold, at every door
(the command, the API, the admin's upload and the dashboard's)."""

import json

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from evaluation.judging import services
from evaluation.judging.rubrics import SHIPPED_DIR
from evaluation.models import Annotation, Item, Rubric, Transcript

pytestmark = pytest.mark.django_db

HISTORY = "Tutor: What is 12 x 3?\nStudent: 38"
LABELS = {  # MRBench's own spellings (MRBench/MRBench_V1.json)
    "Mistake_Identification": "Yes",
    "Mistake_Location": "To some extent",
    "Revealing_of_the_Answer": "Yes (and the answer is correct)",
    "Providing_Guidance": "No",
    "Actionability": "To some extent",
    "Coherence": "Yes",
    "Tutor_Tone": "Neutral",
    "humanlikeness": "To some extent",
}


def record(cid: str, responses: dict, *, history: str = HISTORY, split: str = "test", data: str = "Bridge") -> dict:
    return {
        "conversation_id": cid,
        "conversation_history": history,
        "Data": data,
        "Split": split,
        "Ground_Truth_Solution": "36",
        "anno_llm_responses": {
            name: {"response": text, "annotation": labels} for name, (text, labels) in responses.items()
        },
    }


def benchmark() -> list[dict]:
    """MRBench's traits: id 291616268 twice, with the same dialogue and the same tutors' names; GPT4 answered
    otherwise the second time, Novice gave the same answer and was labelled otherwise, Sonnet is the same."""
    other = dict(LABELS, Revealing_of_the_Answer="Yes (but the answer is incorrect)", humanlikeness="No")
    return [
        record(
            "291616268",
            {
                "GPT4": ("It is 36.", LABELS),
                "Novice": ("check again", LABELS),
                "Sonnet": ("Add 12 three times.", LABELS),
            },
            split="train",
        ),
        record("17", {"GPT4": ("Try again?", LABELS)}, data="MathDial"),
        record(
            "291616268",
            {
                "GPT4": ("Nearly! What is 12 + 12?", other),
                "Novice": ("check again", other),
                "Sonnet": ("Add 12 three times.", LABELS),
            },
        ),
    ]


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("op", password="x" * 16, is_staff=True)
    user.groups.add(Group.objects.get(name="operator"))
    return user


@pytest.fixture
def auth(operator):
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=operator).key}"}


def api(client, auth, body: str, **query) -> tuple[int, dict]:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    response = client.post(f"/api/judging/import?{params}", body, content_type="text/plain", **auth)
    return response.status_code, response.json()


def admin(client, operator, body: bytes, name: str, **fields) -> str:
    client.force_login(operator)
    files = {k: SimpleUploadedFile(f"{k}.json", v) for k, v in fields.items() if isinstance(v, bytes)}
    data = {"file": SimpleUploadedFile(name, body), "format": "auto", "speaker_separator": ":"}
    data |= {"transcript_separator": "---", **{k: v for k, v in fields.items() if not isinstance(v, bytes)}, **files}
    response = client.post("/admin/evaluation/transcript/upload/", data, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def dashboard(client, operator, body: bytes, name: str, **fields) -> str:
    client.force_login(operator)
    files = {k: SimpleUploadedFile(f"{k}.json", v) for k, v in fields.items() if isinstance(v, bytes)}
    data = {"file": SimpleUploadedFile(name, body), "format": "auto"}
    data |= {k: v for k, v in fields.items() if not isinstance(v, bytes)} | files
    response = client.post("/admin/evaluation/judging/import", data, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def command(tmp_path, body: str, name: str, *args: str) -> tuple[str, str]:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8", errors="surrogatepass")
    out, err = [], []

    class Sink:
        def __init__(self, into):
            self.into = into

        def write(self, text):
            self.into.append(text)

        def flush(self):
            pass

    call_command("import_transcripts", str(path), *args, stdout=Sink(out), stderr=Sink(err))
    return "".join(out), "".join(err)


def assert_benchmark_stored():
    conversation = Transcript.objects.get(source="Bridge", external_id="291616268")
    items = dict(conversation.items.values_list("key", "response"))
    assert items == {
        "GPT4": "It is 36.",
        "Novice": "check again",
        "Sonnet": "Add 12 three times.",
        "GPT4 #2": "Nearly! What is 12 + 12?",
        "Novice #2": "check again",  # the same answer, labelled otherwise: a second item, not a clash
    }
    assert conversation.metadata == {"Split": ["train", "test"], "Ground_Truth_Solution": "36"}
    revealed = Annotation.objects.filter(item__transcript=conversation, dimension__name="Revealing_of_the_Answer")
    assert dict(revealed.values_list("item__key", "value")) == {
        "GPT4": "Yes (and the answer is correct)",
        "Novice": "Yes (and the answer is correct)",
        "Sonnet": "Yes (and the answer is correct)",
        "GPT4 #2": "Yes (but the answer is incorrect)",
        "Novice #2": "Yes (but the answer is incorrect)",
    }
    human = Annotation.objects.get(item__transcript=conversation, item__key="GPT4", dimension__name="humanlikeness")
    assert (human.value, human.score) == ("To some extent", 1.0)
    assert Transcript.objects.count() == 2 and Item.objects.count() == 6


# --- the shipped rubric speaks the dataset's language ----------------------------------------------


def test_the_shipped_response_rubric_spells_labels_as_mrbench_and_says_where_from():
    doc = json.loads((SHIPPED_DIR / "tutor-response.json").read_text())
    assert doc["source"]["repository"] == "https://github.com/kaushal0494/UnifyingAITutorEvaluation"
    assert doc["source"]["file"] == "MRBench/MRBench_V1.json"
    rubric = Rubric.objects.get(slug="tutor-response")  # as a fresh database loads it
    categories = dict(rubric.dimensions.values_list("name", "categories"))
    assert categories["Revealing_of_the_Answer"] == [
        "No",
        "Yes (and the answer is correct)",
        "Yes (but the answer is incorrect)",
    ]
    assert categories["humanlikeness"] == ["Yes", "To some extent", "No"]
    for name in ("Mistake_Identification", "Mistake_Location", "Providing_Guidance", "Actionability", "Coherence"):
        assert categories[name] == ["Yes", "To some extent", "No"]
    assert categories["Tutor_Tone"] == ["Encouraging", "Neutral", "Offensive"]


def test_the_rubric_edit_is_a_new_version_where_labels_were_made_under_the_old_spelling():
    rubric = Rubric.objects.get(slug="tutor-response")
    rubric.dimensions.filter(name="humanlikeness").update(
        categories=["Yes", "Somewhat", "No"], aliases={"To some extent": "Somewhat"}
    )
    rubric.versions.all().delete()  # the database as before the edit: v1 spelled "Somewhat"
    services.transcripts_import(json.dumps([record("1", {"GPT4": ("x", {"humanlikeness": "Somewhat"})})]))
    before = Annotation.objects.get()
    assert (before.value, before.rubric_version.number) == ("Somewhat", 1)
    services.rubric_load(SHIPPED_DIR / "tutor-response.json")
    rubric.refresh_from_db()
    assert rubric.version == 2 and rubric.versions.count() == 2
    services.transcripts_import(json.dumps([record("2", {"GPT4": ("y", {"humanlikeness": "Somewhat"})})]))
    after = Annotation.objects.get(item__transcript__external_id="2")
    assert (after.value, after.rubric_version.number) == ("To some extent", 2)  # the old spelling is an alias
    assert Annotation.objects.get(pk=before.pk).value == "Somewhat"  # v1's label stays as it was


# --- repeated ids ---------------------------------------------------------------------------------


def test_the_benchmark_shape_through_the_command(tmp_path):
    out, err = command(tmp_path, json.dumps(benchmark()), "mrbench.json")
    assert "2 created" in out and "6 items, 48 labels written" in out and "1 repeated ids merged" in out
    assert err == ""
    assert_benchmark_stored()
    out, _ = command(tmp_path, json.dumps(benchmark()), "mrbench.json")
    assert "0 created, 0 updated, 2 unchanged" in out  # idempotent, merged the same way again


def test_the_benchmark_shape_through_the_api_the_admin_and_the_dashboard(client, operator, auth):
    status, body = api(client, auth, json.dumps(benchmark()), file="mrbench.json")
    assert status == 201, body
    assert (body["created"], body["items"], body["merged"], body["rejected"]) == (2, 6, 1, [])
    assert_benchmark_stored()
    Transcript.objects.all().delete()
    page = admin(client, operator, json.dumps(benchmark()).encode(), "mrbench.json")
    assert "2 created" in page and "1 repeated ids merged" in page
    assert_benchmark_stored()
    Transcript.objects.all().delete()
    page = dashboard(client, operator, json.dumps(benchmark()).encode(), "mrbench.json")
    assert "2 created" in page and "1 repeated ids merged" in page
    assert_benchmark_stored()


def test_an_id_repeated_with_another_dialogue_is_refused_naming_both_records_at_every_door(
    tmp_path, client, operator, auth
):
    records = benchmark()
    records[2]["conversation_history"] = "Tutor: What is 7 x 8?\nStudent: 54"
    body = json.dumps(records)
    first = "record 0 (conversation_id '291616268'): id '291616268' of source 'Bridge' also names record 2"
    second = "record 2 (conversation_id '291616268'): id '291616268' of source 'Bridge' also names record 0"
    with pytest.raises(CommandError, match="2 problem"):
        command(tmp_path, body, "clash.json")
    status, error = api(client, auth, body, file="clash.json")
    assert status == 400 and first in error["error"] and second in error["error"]
    assert "with another dialogue" in error["error"]
    page = admin(client, operator, body.encode(), "clash.json")
    assert first.replace("'", "&#x27;") in page and second.replace("'", "&#x27;") in page
    page = dashboard(client, operator, body.encode(), "clash.json")
    assert "Nothing was imported" in page and first.replace("'", "&#x27;") in page
    assert not Transcript.objects.exists()


# --- label maps ----------------------------------------------------------------------------------

WORDED = {**LABELS, "humanlikeness": "partly", "Revealing_of_the_Answer": "yes - correct"}
MAP = {
    "*": {"Partly": "To some extent"},
    "Revealing_of_the_Answer": {"Yes - correct": "Yes (and the answer is correct)"},
}


def test_label_wordings_need_a_map_and_an_unmapped_one_names_record_field_label_and_the_allowed(tmp_path):
    body = json.dumps([record("5", {"GPT4": ("Try 12 + 12.", WORDED)})])
    with pytest.raises(CommandError, match="2 problem"):
        command(tmp_path, body, "worded.json")
    (tmp_path / "map.yaml").write_text(
        "'*':\n  Partly: To some extent\nRevealing_of_the_Answer:\n  Yes - correct: Yes (and the answer is correct)\n"
    )
    out, _ = command(tmp_path, body, "worded.json", "--map-labels", str(tmp_path / "map.yaml"))
    assert "1 created" in out and "8 labels written" in out
    values = dict(Annotation.objects.values_list("dimension__name", "value"))
    assert values["humanlikeness"] == "To some extent"
    assert values["Revealing_of_the_Answer"] == "Yes (and the answer is correct)"
    assert values["Mistake_Location"] == "To some extent"
    unmapped = json.dumps([record("6", {"GPT4": ("x", {**WORDED, "Tutor_Tone": "chirpy"})})])
    with pytest.raises(CommandError):
        command(tmp_path, unmapped, "worded.json", "--map-labels", str(tmp_path / "map.yaml"))
    bad_map = tmp_path / "bad.json"
    bad_map.write_text(json.dumps({"humanlikeness": {"partly": "Somewhat-ish"}, "Pacing": {"x": "Yes"}}))
    with pytest.raises(CommandError, match="2 problem"):
        command(tmp_path, body, "worded.json", "--map-labels", str(bad_map))


def test_the_unmapped_label_message(tmp_path, capsys):
    unmapped = json.dumps([record("6", {"GPT4": ("x", {**WORDED, "Tutor_Tone": "chirpy"})})])
    path = tmp_path / "map.json"
    path.write_text(json.dumps(MAP))
    with pytest.raises(CommandError, match="1 problem"):
        call_command("import_transcripts", str(_write(tmp_path, "w.json", unmapped)), "--map-labels", str(path))
    assert (
        "w.json: record 0 (conversation_id '6').anno_llm_responses.GPT4.annotation.Tutor_Tone: 'chirpy' is not on "
        "the scale of tutor-response.Tutor_Tone (nor mapped by map-labels); allowed: 'Encouraging', 'Neutral', "
        "'Offensive'"
    ) in capsys.readouterr().err
    bad_map = tmp_path / "bad.json"
    bad_map.write_text(json.dumps({"humanlikeness": {"partly": "Somewhat-ish"}, "Pacing": {"x": "Yes"}}))
    with pytest.raises(CommandError):
        call_command("import_transcripts", str(tmp_path / "w.json"), "--map-labels", str(bad_map))
    err = capsys.readouterr().err
    assert "map-labels.humanlikeness.partly: 'Somewhat-ish' is not on the scale of tutor-response.humanlikeness" in err
    assert "map-labels.Pacing.x: no rubric of this import has a dimension 'Pacing'" in err


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_label_map_at_the_api_the_admin_and_the_dashboard(client, operator, auth):
    body = json.dumps([record("5", {"GPT4": ("Try 12 + 12.", WORDED)})])
    status, error = api(client, auth, body, file="w.json")
    assert status == 400 and "'partly' is not on the scale of tutor-response.humanlikeness" in error["error"]
    from urllib.parse import quote

    status, report = api(client, auth, body, file="w.json", map_labels=quote(json.dumps(MAP)))
    assert status == 201 and report["labels"] == 8, report
    Transcript.objects.all().delete()
    page = admin(client, operator, body.encode(), "w.json")
    assert "&#x27;partly&#x27; is not on the scale" in page and not Transcript.objects.exists()
    page = admin(client, operator, body.encode(), "w.json", map_labels=json.dumps(MAP).encode())
    assert "8 labels written" in page
    Transcript.objects.all().delete()
    page = dashboard(client, operator, body.encode(), "w.json", map_labels=json.dumps(MAP).encode())
    assert "8 labels written" in page
    assert Annotation.objects.get(dimension__name="humanlikeness").value == "To some extent"


# --- skip invalid ---------------------------------------------------------------------------------


def mixed() -> str:
    return json.dumps(
        [
            record("1", {"GPT4": ("ok", LABELS)}),
            record("2", {"GPT4": ("bad", {**LABELS, "Tutor_Tone": "Sarcastic"})}),
            {"conversation_id": "3", "anno_llm_responses": {"GPT4": {"response": "no history"}}},
        ]
    )


def rejected_lines(file: str) -> tuple[str, str]:
    return (
        f"Rejected record 1 (conversation_id '2'): {file}: record 1 (conversation_id '2').anno_llm_responses.GPT4."
        "annotation.Tutor_Tone: 'Sarcastic' is not on the scale of tutor-response.Tutor_Tone; allowed: 'Encouraging', "
        "'Neutral', 'Offensive'",
        f"Rejected record 2: {file}: record 2 (conversation_id '3').conversation_history: is required",
    )


def test_skip_invalid_through_the_command(tmp_path):
    with pytest.raises(CommandError, match="2 problem"):
        command(tmp_path, mixed(), "mixed.json")
    assert not Transcript.objects.exists()  # the default stays all or nothing
    out, err = command(tmp_path, mixed(), "mixed.json", "--skip-invalid")
    assert "1 created" in out and "2 records rejected" in out
    two, three = rejected_lines(str(tmp_path / "mixed.json"))
    assert err.index(two) < err.index(three)
    assert list(Transcript.objects.values_list("external_id", flat=True)) == ["1"]
    nothing_valid = json.dumps(json.loads(mixed())[1:])
    with pytest.raises(CommandError, match="2 problem"):
        command(tmp_path, nothing_valid, "mixed.json", "--skip-invalid")


def test_skip_invalid_through_the_api_the_admin_and_the_dashboard(client, operator, auth):
    status, _ = api(client, auth, mixed(), file="mixed.json")
    assert status == 400 and not Transcript.objects.exists()
    status, report = api(client, auth, mixed(), file="mixed.json", skip_invalid="true")
    assert status == 201 and report["created"] == 1
    assert [r["record"] for r in report["rejected"]] == ["record 1 (conversation_id '2')", "record 2"]
    two, three = rejected_lines("mixed.json")
    assert [f"Rejected {r['record']}: {r['problems'][0]}" for r in report["rejected"]] == [
        two,
        three + ': a non-empty list of {"role", "content"}',
    ]
    for door in (admin, dashboard):
        Transcript.objects.all().delete()
        page = door(client, operator, mixed().encode(), "mixed.json")
        assert not Transcript.objects.exists()
        page = door(client, operator, mixed().encode(), "mixed.json", skip_invalid="on")
        assert "2 records rejected" in page, door.__name__
        assert two.replace("'", "&#x27;") in page and three.replace("'", "&#x27;") in page
        assert Transcript.objects.count() == 1


# --- the speaker separator at every upload door ---------------------------------------------------

TEXT = (
    "# id: lesson-1\n# label pacing: 7\nTutor - What is 3 x 4?\nStudent - 12\n===\nTutor - And 4 x 4?\nStudent - 16\n"
)


def test_the_speaker_and_transcript_separators_at_the_admin_and_the_dashboard(client, operator):
    page = admin(client, operator, TEXT.encode(), "sep.txt")
    assert "no speaker prefix (Tutor:/Student:)" in page and not Transcript.objects.exists()
    page = admin(client, operator, TEXT.encode(), "sep.txt", speaker_separator=" -", transcript_separator="===")
    assert "2 created" in page
    assert Transcript.objects.get(external_id="lesson-1").messages[1] == {"role": "student", "content": "12"}
    Transcript.objects.all().delete()
    page = dashboard(client, operator, TEXT.encode(), "sep.txt", speaker_separator=" -", transcript_separator="===")
    assert "2 created" in page and Transcript.objects.count() == 2


# --- text no column can hold ----------------------------------------------------------------------

LONG_ANNOTATOR = "# annotator: " + "a" * 200 + "\n# label pacing: 4\nTutor: hi\nStudent: hello\n"
SURROGATE = '[{"id": "s", "messages": [{"role": "tutor", "content": "bad \\udfff text"}]}]'
HUGE = '[{"id": "n", "messages": [{"role": "tutor", "content": "hi"}], "labels": {"pacing": ' + "9" * 5000 + "}}]"
BAD_TEXT = [
    ("long.txt", LONG_ANNOTATOR, "transcript 1 (id 'long-1', line 1).annotator: is 200 characters: at most 150"),
    ("sur.json", SURROGATE, "record 0.messages[0].content: holds a lone surrogate"),
    ("huge.json", HUGE, "record 0.labels.pacing: is a number of 5000 digits: too long to read"),
]


@pytest.mark.parametrize(("name", "body", "problem"), BAD_TEXT)
def test_bad_text_is_an_error_naming_the_field_at_every_door(
    tmp_path, client, operator, auth, capsys, name, body, problem
):
    with pytest.raises(CommandError, match="1 problem"):
        call_command("import_transcripts", str(_write_raw(tmp_path, name, body)))
    assert problem in capsys.readouterr().err
    status, error = api(client, auth, body, file=name)
    assert status == 400 and list(error["fields"]) == [problem.split(": ")[0]], error
    page = admin(client, operator, body.encode(), name)
    assert problem.replace("'", "&#x27;") in page
    page = dashboard(client, operator, body.encode(), name)
    assert "Nothing was imported" in page and problem.replace("'", "&#x27;") in page
    assert not Transcript.objects.exists()


def _write_raw(tmp_path, name, body):
    path = tmp_path / name
    path.write_bytes(body.encode())
    return path


def test_an_over_long_annotator_or_source_option_is_an_error_naming_it_at_every_door(tmp_path, client, operator, auth):
    body = json.dumps([record("1", {"GPT4": ("ok", LABELS)})])
    with pytest.raises(CommandError, match="1 problem"):
        call_command("import_transcripts", str(_write(tmp_path, "a.json", body)), "--annotator", "x" * 200)
    with pytest.raises(CommandError, match="1 problem"):
        call_command("import_transcripts", str(tmp_path / "a.json"), "--annotator", "bad \udcff")  # from argv
    status, error = api(client, auth, body, annotator="x" * 200)
    assert status == 400 and "annotator" in error["fields"]
    page = admin(client, operator, body.encode(), "a.json", annotator="x" * 200)
    assert "Ensure this value has at most 150 characters" in page
    page = dashboard(client, operator, body.encode(), "a.json", annotator="x" * 200, source="y" * 300)
    assert "annotator: is 200 characters: at most 150" in page and "source: is 300 characters: at most 100" in page
    assert not Transcript.objects.exists()
