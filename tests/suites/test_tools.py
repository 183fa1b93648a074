"""Tools offered to the agent under test: schemas from signatures, and arguments checked before a call."""

import json
from pathlib import Path

import jsonschema
import pytest

from evaluation.providers.loopback import Reply
from evaluation.suites import RunOptions, load_file, parse_suite, run_suite
from evaluation.suites.cache import FileCache
from evaluation.suites.subjects import resolve_subject

FIXTURE = Path(__file__).with_name("annotated_tools.py")
GOOD = {"stops": [1, 2.5, 4], "limit": 2, "mode": "cycle", "unit": "metric", "start": {"lat": 51.5, "lon": -0.1}}


@pytest.fixture
def tool(tmp_path):
    suite = parse_suite(f"---\ntools: {FIXTURE}:plan_route\n---\n", str(tmp_path / "EVAL.md"))
    [tool] = resolve_subject(suite).tools
    return tool


def test_the_schema_describes_every_parameter_type_under_string_annotations(tool):
    assert tool.schema()["name"] == "plan_route"
    assert tool.schema()["description"] == "Plan a route through the stops."
    assert tool.parameters == {
        "type": "object",
        "additionalProperties": False,
        "required": ["stops", "limit", "mode", "unit", "start"],
        "properties": {
            "stops": {
                "type": "array",
                "items": {"type": "number"},
                "description": "Distances of the stops from the start.",
            },
            "limit": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "description": "The most stops to visit; null visits them all.",
            },
            "mode": {"type": "string", "enum": ["walk", "cycle"], "description": "How to travel."},
            "unit": {"type": "string", "enum": ["metric", "imperial"], "description": "Units for the answer."},
            "start": {
                "type": "object",
                "properties": {
                    "lat": {"type": "number"},
                    "lon": {"type": "number"},
                    "title": {"type": "string", "default": ""},
                },
                "required": ["lat", "lon"],
                "description": "Where the route begins.",
            },
            "note": {"type": "string", "default": "", "description": "Shown to the rider."},
        },
    }


def test_the_schema_is_valid_json_schema_that_accepts_good_arguments(tool):
    schema = json.loads(json.dumps(tool.parameters))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(GOOD, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**GOOD, "mode": "drive"}, schema)


def test_good_arguments_reach_the_function_as_its_own_types(tool):
    assert tool.call(GOOD) == "cycle 2 stops, 3.5 metric units from 51.5,-0.1"
    assert tool.call({**GOOD, "limit": None, "note": "!"}) == "cycle 3 stops, 7.5 metric units from 51.5,-0.1!"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({**GOOD, "stops": [1, "far"]}, "stops[1]: Input should be a valid number"),
        ({**GOOD, "limit": "some"}, "limit: Input should be a valid integer"),
        ({**GOOD, "mode": "drive"}, "mode: Input should be 'walk' or 'cycle' (got 'drive')"),
        ({**GOOD, "unit": "furlongs"}, "unit: Input should be 'metric' or 'imperial' (got 'furlongs')"),
        ({**GOOD, "start": {"lat": 1}}, "start.lon: missing (this argument is required)"),
        ({k: v for k, v in GOOD.items() if k != "mode"}, "mode: missing (this argument is required)"),
        ({**GOOD, "speed": 3}, "speed: not a parameter of plan_route"),
    ],
)
def test_a_wrong_argument_comes_back_as_a_message_naming_it(tool, arguments, problem):
    message = tool.call(arguments)
    assert message.startswith("Invalid arguments for plan_route: ") and problem in message
    assert message.endswith("Call the tool again with corrected arguments.")


def test_a_type_the_schema_cannot_describe_is_a_suite_error(tmp_path):
    (tmp_path / "odd.py").write_text(
        "from __future__ import annotations\n\ndef odd(x: Missing) -> str:\n    return ''\n"
    )
    suite = parse_suite("---\ntools: odd.py:odd\n---\n", str(tmp_path / "EVAL.md"))
    with pytest.raises(Exception, match=r"EVAL.md: tools: tool odd: cannot read the parameters' annotations"):
        resolve_subject(suite)


@pytest.mark.django_db
def test_the_model_sees_the_validation_message_and_can_correct_itself(tmp_path, loopback):
    (tmp_path / "EVAL.md").write_text(
        f"---\ntools: {FIXTURE}:plan_route\n---\n## plans a route\n### Prompt\nPlan it.\n### Expect\nA plan.\n"
    )

    def respond(endpoint, body, n):
        if "verdict" in json.dumps(body.get("response_format") or {}):
            return Reply(json={"verdict": "PASS", "reason": "ok", "warning": None})
        results = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
        if not results:
            return Reply(tool_calls=[{"name": "plan_route", "arguments": {**GOOD, "mode": "drive"}}])
        if len(results) == 1:
            return Reply(tool_calls=[{"name": "plan_route", "arguments": GOOD}])
        return Reply(text=f"Done: {json.loads(results[-1])}")

    loopback.responder = respond
    model = f"openai/agent-model@{loopback.openai_url}"
    options = RunOptions(model=model, judge_model=model, cache=FileCache(tmp_path / "cache.json"), use_db=False)
    [result] = run_suite(load_file(tmp_path / "EVAL.md"), options)
    first, second = result.transcript["tool_calls"]
    assert first["result"].startswith("Invalid arguments for plan_route: mode: Input should be 'walk' or 'cycle'")
    assert second["result"] == "cycle 2 stops, 3.5 metric units from 51.5,-0.1"
    assert result.transcript["response"] == "Done: cycle 2 stops, 3.5 metric units from 51.5,-0.1"
    assert result.passed


def test_recursive_models_keep_their_defs_and_any_parameter_name_works(tmp_path):
    (tmp_path / "tree.py").write_text(
        "from __future__ import annotations\n"
        "from pydantic import BaseModel\n\n"
        "class Node(BaseModel):\n    name: str\n    children: list[Node] = []\n\n"
        "def walk(root: Node, json: str, /, schema: int = 1) -> str:\n"
        "    return f'{root.name} {len(root.children)} {json} {schema}'\n"
    )
    suite = parse_suite("---\ntools: tree.py:walk\n---\n", str(tmp_path / "EVAL.md"))
    [tool] = resolve_subject(suite).tools
    jsonschema.Draft202012Validator.check_schema(tool.parameters)
    assert tool.parameters["properties"]["root"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert list(tool.parameters["$defs"]) == ["Node"]
    assert tool.call({"root": {"name": "a", "children": [{"name": "b"}]}, "json": "j"}) == "a 1 j 1"
    assert "root.children[0].name: missing" in tool.call({"root": {"name": "a", "children": [{}]}, "json": "j"})
