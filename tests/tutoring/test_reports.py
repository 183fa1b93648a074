"""The reports' JSON files read as the standard library would write them (orjson writes them)."""

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from decimal import Decimal

from evaluation.models.runs import RunStatus
from evaluation.tutoring import reports


@dataclass
class Decision:
    turn: int


def test_report_json_is_what_json_dumps_writes_with_indent_2_and_default_str():
    data = {
        "run": {
            "run_id": "run_1",
            "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "status": RunStatus.RUNNING,
        },
        "messages": [
            {"role": "student", "content": 'naïve "quotes", a \\ backslash, a\ttab, a\nnewline and 🙂', "turn": 1},
            {"role": "tutor", "content": "", "turn": 2, "metadata": {}},
        ],
        "scores": {"clarity": 7, "accuracy": 8.25, "third": 1 / 3, "big": 12345678901234, "none": None},
        3: ["an int key", True, False, [], {}],
        "when": dt.datetime(2026, 11, 26, 12, 0, 5, 123456, tzinfo=dt.UTC),
        "day": dt.date(2026, 11, 26),
        "cost": Decimal("0.0125"),
        "pair": (1, "two"),
        "decision": Decision(3),
    }
    assert reports._json(data) == json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def test_a_very_small_or_large_float_may_be_written_otherwise_but_reads_back_the_same():
    data = {"cost_usd": 1.25e-05, "tokens": 2.5e20, "tiny": 1e-07}
    assert reports._json(data) == '{\n  "cost_usd": 0.0000125,\n  "tokens": 2.5e+20,\n  "tiny": 1e-7\n}\n'
    assert json.loads(reports._json(data)) == data


def test_nan_and_infinity_are_written_as_null_so_the_file_stays_json():
    assert reports._json({"mean": float("nan"), "upper": float("inf")}) == '{\n  "mean": null,\n  "upper": null\n}\n'


def test_what_orjson_refuses_is_written_by_the_standard_library_so_a_report_never_fails():
    nested: list = []
    for _ in range(300):
        nested = [nested]
    for data in ({"state": {"counter": 2**64}}, {"state": nested}):
        assert reports._json(data) == json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
