"""Text imports take `# key: value` lines after the messages as headers; a refused file names every bad
record (the first 20, then how many more), whatever its name; drift ingest bounds its report alike."""

import json

import pytest

from evaluation.drift.ingest import messages_ingest, parse_records
from evaluation.errors import InvalidInput
from evaluation.judging.importing import parse

TEXT = """# id: lesson-7
Tutor: What is 0.3 compared with 0.25?
Student: 0.25 is bigger because 25 is bigger than 3.
Tutor: Let's line up the tenths.
# label pacing: 8
# annotator: ana
# mood: calm
"""


def test_label_lines_after_the_messages_are_labels_not_message_text():
    record = parse(TEXT.encode(), file="lesson.txt").records[0]
    assert record.messages[-1] == ("tutor", "Let's line up the tenths.")
    assert [(lab.annotator, lab.dimension, lab.value) for lab in record.items[0].labels] == [("ana", "pacing", "8")]
    assert record.metadata == {"mood": "calm"}
    assert record.external_id == "lesson-7"


def test_a_hash_line_between_messages_stays_the_messages_text():
    text = "Tutor: Steps:\n# one: line up\nStudent: ok\n"
    record = parse(text.encode(), file="steps.txt").records[0]
    assert record.messages == (("tutor", "Steps:\n# one: line up"), ("student", "ok"))


def bad_lines(count: int) -> bytes:
    good = {"id": "ok", "messages": [{"role": "tutor", "content": "hi"}]}
    lines = [json.dumps(good)] + [json.dumps({"id": f"bad-{i}", "messages": []}) for i in range(count)]
    return "\n".join(lines).encode()


@pytest.mark.parametrize("name", ["upload.json", "upload", "upload.jsonl"])
def test_json_lines_with_two_bad_records_report_both_whatever_the_name(name):
    with pytest.raises(InvalidInput) as caught:
        parse(bad_lines(2), file=name)
    assert [p.line for p in caught.value.problems] == [2, 3], caught.value.problems


def test_many_bad_records_report_the_first_20_and_count_the_rest():
    with pytest.raises(InvalidInput) as caught:
        parse(bad_lines(25), file="upload.jsonl")
    problems = caught.value.problems
    assert [p.line for p in problems[:-1]] == list(range(2, 22))
    assert problems[-1].reason == "5 more record(s) have problems (25 in all; the first 20 shown)"


def test_drift_ingest_reports_every_bad_line_up_to_20_and_counts_the_rest():
    body = "\n".join(["{bad"] * 2)
    with pytest.raises(InvalidInput) as caught:
        parse_records(body)
    assert [p.line for p in caught.value.problems] == [1, 2]
    with pytest.raises(InvalidInput) as caught:
        parse_records("\n".join(["{bad"] * 23))
    assert len(caught.value.problems) == 21
    assert caught.value.problems[-1].reason == "3 more record(s) have problems (23 in all; the first 20 shown)"


@pytest.mark.django_db
def test_drift_ingest_bounds_the_checked_records_problems_too():
    records = [(f"line {n}", {"agent": "nobody", "channel": "c", "text": "t"}) for n in range(1, 26)]
    with pytest.raises(InvalidInput) as caught:
        messages_ingest(records)
    problems = caught.value.problems
    assert [p.field for p in problems[:2]] == ["line 1.agent", "line 2.agent"]
    assert len(problems) == 21 and problems[-1].reason.startswith("5 more record(s)")
