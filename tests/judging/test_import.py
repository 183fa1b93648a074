"""Importing conversations from outside: each format, all or nothing, idempotent, labels checked against the rubric."""

import json

import pytest
from django.core.management import CommandError, call_command

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import services
from evaluation.limits import TooLarge
from evaluation.models import Annotation, Item, Rubric, Transcript

pytestmark = pytest.mark.django_db

TRANSCRIPTS = [
    {
        "id": "s-1",
        "messages": [
            {"role": "tutor", "content": "What is 3/8 as a decimal?"},
            {"role": "student", "content": "0.38"},
            {"role": "teacher", "content": "Not quite: 3 divided by 8. Try the division again?"},
        ],
        "metadata": {"school": "north"},
        "labels": {"responsiveness": 7, "pacing": "6"},
    },
    {
        "id": 2,
        "messages": [{"role": "tutor", "content": "Hi!"}, {"role": "user", "content": "hello"}],
        "labels": [
            {"annotator": "ana", "labels": {"authenticity": 4}},
            {"annotator": "ben", "labels": {"authenticity": 5, "pacing": 3}},
        ],
    },
]


def candidate_set(source: str, conversation_id: str, annotations: dict) -> dict:
    return {
        "conversation_id": conversation_id,
        "Data": source,
        "conversation_history": "Tutor: What is 12 x 3?\nStudent: 38\n  (I added 12 three times)",
        "Ground_Truth_Solution": "36",
        "anno_llm_responses": {
            tutor: (
                {"response": f"{tutor} says: not quite, check 12+12+12.", "annotation": a}
                if a is not None
                else {"response": f"{tutor} reply"}
            )
            for tutor, a in annotations.items()
        },
    }


def test_json_transcripts_with_labels_from_one_and_from_several_annotators():
    report = services.transcripts_import(json.dumps(TRANSCRIPTS), format="json", file="north.json")
    assert (report.created, report.updated, report.unchanged, report.items, report.labels) == (2, 0, 0, 2, 5)
    assert report.rubrics == ("tutor-session",)
    first = Transcript.objects.get(source="north", external_id="s-1")
    assert [m["role"] for m in first.messages] == ["tutor", "student", "tutor"]  # teacher -> tutor
    assert first.metadata == {"school": "north"}
    assert first.topic is None
    labels = {
        (a.annotator, a.dimension.name): (a.value, a.score) for a in Annotation.objects.filter(item__transcript=first)
    }
    assert labels == {("north", "responsiveness"): ("7", 6.0), ("north", "pacing"): ("6", 5.0)}
    second = Annotation.objects.filter(item__transcript__external_id="2").values_list(
        "annotator", "dimension__name", "value"
    )
    assert sorted(second) == [("ana", "authenticity", "4"), ("ben", "authenticity", "5"), ("ben", "pacing", "3")]


def test_jsonl_names_the_line_and_field_and_stores_nothing():
    good = json.dumps(TRANSCRIPTS[0])
    bad = json.dumps({"id": "s-3", "messages": [{"role": "tutor"}], "labels": {}})
    with pytest.raises(InvalidInput) as caught:
        services.transcripts_import(f"{good}\n\n{bad}\n", format="jsonl", file="f.jsonl")
    problem = caught.value.problems[0]
    assert (problem.line, problem.field) == (3, "record 1 (id 's-3').messages[0].content")
    assert "f.jsonl:3:" in str(caught.value)
    assert not Transcript.objects.exists()
    with pytest.raises(InvalidInput) as caught:
        services.transcripts_import('{"id": 1}\n{oops\n', format="jsonl", file="f.jsonl")
    assert [p.line for p in caught.value.problems] == [1, 2]
    assert "invalid JSON" in str(caught.value.problems[1])


def test_plain_text_with_speaker_prefixes_and_a_configurable_separator():
    text = (
        "# id: lesson-7\n# topic: comparing-decimals\n# label pacing: 8\n# label responsiveness: 9\n# school: west\n"
        "Tutor - Which is bigger, 0.5 or 0.45?\nStudent - 0.45\nbecause 45 is bigger\nTutor - Compare tenths first.\n"
        "===\n"
        "Tutor - Next one.\nStudent - ok\n"
    )
    with pytest.raises(InvalidInput, match="no topic 'comparing-decimals'"):
        services.transcripts_import(
            text, format="text", file="west.txt", speaker_separator=" -", transcript_separator="==="
        )
    call_command("load_catalog", "--only", "topics")
    report = services.transcripts_import(
        text, format="text", file="west.txt", speaker_separator=" -", transcript_separator="==="
    )
    assert (report.created, report.labels) == (2, 2)
    lesson = Transcript.objects.get(external_id="lesson-7")
    assert lesson.messages[1] == {"role": "student", "content": "0.45\nbecause 45 is bigger"}
    assert lesson.topic.topic_id == "comparing-decimals" and lesson.metadata == {"school": "west"}
    assert Transcript.objects.filter(source="west", external_id="west-2").exists()  # no id: file stem and place
    with pytest.raises(InvalidInput) as caught:
        services.transcripts_import("Hello there\nTutor: hi\n", format="text", file="x.txt")
    assert caught.value.problems[0].line == 1 and "no speaker prefix (Tutor:/Student:)" in str(caught.value)


def test_candidate_sets_from_two_sources_with_a_missing_annotation():
    full = {
        "Mistake_Identification": "Yes",
        "Mistake_Location": "To some extent",
        "Revealing_of_the_Answer": "No",
        "Providing_Guidance": "Yes",
        "Actionability": "yes",  # case is forgiven
        "Coherence": "Yes",
        "Tutor_Tone": "Encouraging",
        "humanlikeness": "Somewhat",  # an alias of To some extent (the rubric's spelling before MRBench's own)
    }
    sets = [
        candidate_set("MathDial", "101", {"Sonnet": full, "GPT4": {"Tutor_Tone": "Neutral"}}),
        candidate_set("Bridge", "101", {"Sonnet": full, "Novice": None}),
    ]
    report = services.transcripts_import(json.dumps(sets), file="mrbench.json")
    assert report.format == "json" and report.rubrics == ("tutor-response",)
    assert (report.created, report.items, report.labels, report.sources) == (2, 4, 17, ("Bridge", "MathDial"))
    math = Transcript.objects.get(source="MathDial", external_id="101")
    assert math.messages == [
        {"role": "tutor", "content": "What is 12 x 3?"},
        {"role": "student", "content": "38\n(I added 12 three times)"},
    ]
    assert math.metadata == {"Ground_Truth_Solution": "36"}
    assert sorted(math.items.values_list("key", flat=True)) == ["GPT4", "Sonnet"]
    novice = Item.objects.get(transcript__source="Bridge", key="Novice")
    assert novice.response == "Novice reply" and not novice.annotations.exists()
    human = Annotation.objects.get(item__transcript=math, item__key="Sonnet", dimension__name="humanlikeness")
    assert (human.value, human.score, human.annotator) == ("To some extent", 1.0, "MathDial")


def test_a_label_outside_the_scale_is_refused_naming_the_value_and_the_allowed_ones():
    sets = [
        candidate_set("MathDial", "7", {"Sonnet": {"Tutor_Tone": "Neutral"}}),
        candidate_set("MathDial", "8", {"Sonnet": {"Tutor_Tone": "Sarcastic", "Made_Up": "Yes"}}),
    ]
    with pytest.raises(InvalidInput) as caught:
        services.transcripts_import(json.dumps(sets), file="bad.json")
    messages = [str(p) for p in caught.value.problems]
    assert (
        "bad.json: record 1 (conversation_id '8').anno_llm_responses.Sonnet.annotation.Tutor_Tone: 'Sarcastic' is not "
        "on the scale of tutor-response.Tutor_Tone; allowed: 'Encouraging', 'Neutral', 'Offensive'" in messages
    )
    assert any("has no dimension 'Made_Up'" in m for m in messages)
    assert not Transcript.objects.exists()  # the valid record 0 was not stored either
    with pytest.raises(
        InvalidInput,
        match=r"labels.pacing: 11 is not on the scale of tutor-session.pacing; allowed: an integer from 1 to 10",
    ):
        services.transcripts_import(
            json.dumps({"id": "x", "messages": TRANSCRIPTS[0]["messages"], "labels": {"pacing": 11}})
        )


def test_reimport_is_idempotent_and_a_changed_record_is_updated():
    body = json.dumps(TRANSCRIPTS)
    services.transcripts_import(body, file="north.json")
    again = services.transcripts_import(body, file="north.json")
    assert (again.created, again.updated, again.unchanged, again.labels) == (0, 0, 2, 0)
    changed = [dict(TRANSCRIPTS[0], labels={"responsiveness": 3}), TRANSCRIPTS[1]]
    report = services.transcripts_import(json.dumps(changed), file="north.json")
    assert (report.created, report.updated, report.unchanged) == (0, 1, 1)
    assert Transcript.objects.count() == 2 and Item.objects.count() == 2
    assert Annotation.objects.get(dimension__name="responsiveness").value == "3"
    # a label no longer in the file is kept: nothing stored is lost by a re-import
    assert Annotation.objects.filter(item__transcript__external_id="s-1", dimension__name="pacing").exists()


def test_a_rubric_of_the_wrong_unit_and_an_id_repeated_with_another_dialogue_are_refused():
    with pytest.raises(InvalidInput, match="labels sessions but rubric 'tutor-response' judges responses"):
        services.transcripts_import(json.dumps(TRANSCRIPTS), rubric="tutor-response")
    other = dict(TRANSCRIPTS[0], messages=TRANSCRIPTS[1]["messages"])
    with pytest.raises(InvalidInput) as caught:
        services.transcripts_import(json.dumps([TRANSCRIPTS[0], other]))
    assert [str(p) for p in caught.value.problems] == [
        "record 0 (id 's-1'): id 's-1' of source 'import' also names record 1 (id 's-1'), with another dialogue",
        "record 1 (id 's-1'): id 's-1' of source 'import' also names record 0 (id 's-1'), with another dialogue",
    ]
    report = services.transcripts_import(json.dumps([TRANSCRIPTS[0], TRANSCRIPTS[0]]))  # the same twice: one
    assert (report.created, report.merged, report.labels) == (1, 1, 2)


def test_the_file_and_record_limits(settings):
    settings.EVALUATION = {**settings.EVALUATION, "IMPORT_MAX_RECORDS": 1}
    with pytest.raises(TooLarge, match="holds 2 records: the limit is 1"):
        services.transcripts_import(json.dumps(TRANSCRIPTS))
    settings.EVALUATION = {**settings.EVALUATION, "IMPORT_MAX_FILE_BYTES": 100}
    with pytest.raises(TooLarge, match=r"IMPORT_MAX_FILE_BYTES"):
        services.transcripts_import(json.dumps(TRANSCRIPTS[:1]))


def test_the_command_imports_and_exits_non_zero_on_bad_input(tmp_path, capsys):
    good = tmp_path / "north.jsonl"
    good.write_text("\n".join(json.dumps(t) for t in TRANSCRIPTS))
    call_command("import_transcripts", str(good))
    assert "2 created, 0 updated, 0 unchanged; 2 items, 5 labels" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "z", "messages": []}]))
    with pytest.raises(CommandError, match="1 problem"):
        call_command("import_transcripts", str(bad), "--rubric", "tutor-session")
    assert "bad.json: record 0 (id 'z').messages: is required" in capsys.readouterr().err
    with pytest.raises(CommandError, match="no rubric 'nope'; rubrics: tutor-response, tutor-session"):
        call_command("import_transcripts", str(good), "--rubric", "nope")


def test_the_shipped_rubrics():
    session = Rubric.objects.get(slug="tutor-session")
    assert list(session.dimensions.values_list("name", flat=True)) == [
        "responsiveness",
        "explanation_quality",
        "emotional_attunement",
        "pacing",
        "authenticity",
    ]
    assert session.unit == "session" and session.dimensions.get(name="pacing").scale_max == 10
    response = Rubric.objects.get(slug="tutor-response")
    assert response.unit == "response" and response.dimensions.count() == 8
    assert response.dimensions.get(name="Tutor_Tone").categories == ["Encouraging", "Neutral", "Offensive"]
    assert "persona" not in session.judge_prompt.lower() and "simulated" not in session.judge_prompt.lower()


def test_a_shipped_rubric_missing_from_the_database_is_loaded_again_from_its_file():
    Rubric.objects.filter(slug="tutor-response").delete()
    rubric = services.rubric_get("tutor-response")
    assert rubric.slug == "tutor-response" and rubric.dimensions.count() == 8
    with pytest.raises(NotFound, match="no rubric 'nope'"):
        services.rubric_get("nope")
