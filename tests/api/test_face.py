"""The API's own face: GET /api/ lists it, the words for a run's progress are the same in every shape,
the export's `limit` works, and the schema's error examples are what the server answers."""

import csv
import io
import json

import pytest
import yaml
from django.core.management import call_command

from evaluation.api.permissions import NOT_STAFF
from tests.api.conftest import make_run

pytestmark = pytest.mark.django_db


def test_api_index_lists_the_docs_and_every_operation_by_tag(anonymous):
    response = anonymous.get("/api/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    assert body["name"] == "Agent evaluation API" and body["version"]
    assert {name: link.split("testserver", 1)[1] for name, link in body["links"].items()} == {
        "schema": "/api/schema/",
        "docs": "/api/docs/",
        "redoc": "/api/redoc/",
    }
    tags = {tag["name"]: tag for tag in body["tags"]}
    assert list(tags) == ["runs", "tutoring", "drift", "suites", "catalogue", "judging"]
    assert all(tag["description"] for tag in tags.values())
    start = [op for op in tags["tutoring"]["operations"] if op["operation_id"] == "evaluation_start"]
    assert start == [
        {
            "method": "POST",
            "path": "/api/evaluation/start",
            "operation_id": "evaluation_start",
            "summary": "Start simulated runs",
        }
    ]
    listed = [op["operation_id"] for tag in tags.values() for op in tag["operations"]]
    schema = anonymous.get("/api/schema/?format=json").json()
    every = [op["operationId"] for item in schema["paths"].values() for op in item.values()]
    assert len(listed) == 39 and sorted(listed) == sorted(every)
    assert "spec 00" not in response.content.decode().lower()


def test_api_index_shows_nothing_stored(anonymous, runs):
    text = anonymous.get("/api/").content.decode()
    assert "run_ace" not in text and "rex" not in text


def test_progress_words_are_the_same_in_status_detail_and_list(api, catalog):
    make_run("run_busy", status="running", detail="Turn 2/20", turn=2)
    one = api.get("/api/evaluation/runs/run_busy/status").json()
    current = api.get("/api/evaluation/status").json()
    detail = api.get("/api/evaluation/runs/run_busy").json()
    listed = api.get("/api/evaluation/runs").json()["results"][0]
    for shape in (one, current, detail, listed):
        assert (shape["stage"], shape["run_status"]) == ("running_session", "running"), shape
    # the old keys stay as their clients read them: the stage when polling, the lifecycle in a run
    assert one["status"] == current["status"] == "running_session"
    assert detail["status"] == listed["status"] == "running"
    started = api.post(
        "/api/evaluation/start", {"topic_id": "comparing-decimals", "persona_file": "ace"}, format="json"
    ).json()
    assert (started["stage"], started["run_status"], started["status"]) == ("queued", "queued", "queued")
    accepted = api.post("/api/evaluation/runs/run_busy/cancel").json()
    assert (accepted["stage"], accepted["run_status"], accepted["status"]) == ("cancelled", "cancelled", "cancelled")


def read_csv(response):
    assert response.status_code == 200, response.content
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_export_keeps_the_newest_limit_runs(api, runs):
    body = api.get("/api/evaluation/runs/export?format=json&kind=tutor&limit=2").json()
    assert body["count"] == 2 and [r["run_id"] for r in body["results"]] == ["run_struggler", "run_ace"]
    rows = read_csv(api.get("/api/evaluation/runs/export?format=csv&kind=tutor&limit=1"))
    assert [r["run_id"] for r in rows] == ["run_struggler"]
    assert "score:pacing" not in rows[0]  # only the dimensions of the runs it holds
    everything = api.get("/api/evaluation/runs/export?limit=100").json()
    assert everything["count"] == 4


def test_export_limit_makes_a_large_selection_exportable(api, runs, settings):
    settings.EVALUATION = {**settings.EVALUATION, "EXPORT_MAX_ROWS": 3}
    assert api.get("/api/evaluation/runs/export").status_code == 400
    assert api.get("/api/evaluation/runs/export?limit=3").json()["count"] == 3
    too_many = api.get("/api/evaluation/runs/export?limit=4")
    assert too_many.status_code == 400
    assert too_many.json()["fields"]["limit"] == ["4 is more than an export may hold (3, EXPORT_MAX_ROWS)"]


@pytest.mark.parametrize(("query", "reason"), [("limit=abc", "A valid integer"), ("limit=0", "greater than")])
def test_export_refuses_a_bad_limit(api, db, query, reason):
    response = api.get(f"/api/evaluation/runs/export?{query}")
    assert response.status_code == 400 and reason in response.json()["fields"]["limit"][0], response.content


@pytest.fixture(scope="module")
def schema(tmp_path_factory, django_db_blocker):
    path = tmp_path_factory.mktemp("schema") / "schema.yaml"
    with django_db_blocker.unblock():
        call_command("spectacular", "--file", str(path))
    return yaml.safe_load(path.read_text())


def example_of(schema, path, method, code):
    examples = schema["paths"][path][method]["responses"][str(code)]["content"]["application/json"]["examples"]
    return next(iter(examples.values()))["value"]


def test_error_examples_are_what_the_server_answers(schema, api, anonymous, catalog, client, django_user_model):
    start = "/api/evaluation/start"
    missing = api.post(start, {"topic_id": "nope", "persona_file": "ace"}, format="json")
    assert missing.status_code == 404 and missing.json() == example_of(schema, start, "post", 404)
    bad = api.post(start, {"topic_id": "comparing-decimals", "max_turns": 101}, format="json")
    assert bad.status_code == 400 and bad.json() == example_of(schema, start, "post", 400)
    nobody = anonymous.post(start, {}, format="json")
    assert nobody.status_code == 401 and nobody.json() == example_of(schema, start, "post", 401)
    user = django_user_model.objects.create_user("someone", password="pw")
    client.force_login(user)
    refused = client.get("/api/evaluation/runs")
    assert refused.status_code == 403 and refused.json() == {"error": NOT_STAFF}
    assert example_of(schema, "/api/evaluation/runs", "get", 403) == {"error": NOT_STAFF}
    not_json = api.generic("POST", start, "nope", content_type="application/json")
    assert not_json.status_code == 400 and not_json.json() == example_of(
        schema, "/api/drift/agents/{agent_id}/gate", "post", 400
    )
    twice = api.get("/api/evaluation/runs?kind=tutor&kind=drift")
    assert twice.status_code == 400 and twice.json() == example_of(schema, "/api/evaluation/runs", "get", 400)
    run = "/api/evaluation/runs/run_20260101_120000_nobody"
    assert api.get(run).json() == example_of(schema, "/api/evaluation/runs/{run_id}", "get", 404)


def test_every_error_response_has_an_example_in_the_error_shape(schema):
    for path, item in schema["paths"].items():
        for method, op in item.items():
            for code, response in op["responses"].items():
                if code.startswith("2"):
                    continue
                examples = response["content"]["application/json"].get("examples")
                assert examples, (method, path, code)
                for example in examples.values():
                    value = example["value"]
                    assert isinstance(value["error"], str) and value["error"], (method, path, code)
                    assert "additionalProp" not in json.dumps(value), (method, path, code)


def test_request_bodies_and_path_parameters_carry_real_examples(schema):
    for path, item in schema["paths"].items():
        for method, op in item.items():
            for parameter in op.get("parameters", []):
                if parameter["in"] == "path":
                    assert parameter.get("examples"), (method, path, parameter["name"])
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None and path != "/api/judging/import":
                assert body.get("examples"), (method, path)
    start = schema["paths"]["/api/evaluation/start"]["post"]["requestBody"]["content"]["application/json"]
    first = next(iter(start["examples"].values()))["value"]
    assert first["topic_id"] == "comparing-decimals" and first["persona_file"] == "ace"
    assert first["provider"] == "offline"
    topic = schema["paths"]["/api/catalogue/topics/{topic_id}"]["get"]["parameters"][0]
    assert next(iter(topic["examples"].values()))["value"] == "comparing-decimals"


def test_one_documented_field_per_concept_and_product_words(schema):
    fields = schema["components"]["schemas"]["StartInput"]["properties"]
    assert fields["persona"].get("deprecated") is True and "persona_file" in fields["persona"]["description"]
    assert not fields["persona_file"].get("deprecated")
    text = json.dumps(schema).lower()
    assert "spec 00" not in text
    tags = {tag["name"]: tag["description"] for tag in schema["tags"]}
    assert tags["tutoring"].startswith("Tutor runs") and tags["drift"].startswith("Persona drift")
