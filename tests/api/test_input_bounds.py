"""Numbers and booleans the schema bounds are refused beyond their bounds, at every door, with the field
named: a seed out of its range (it was a 500 OverflowError past 2**63, and past 2**53 a run that failed on
the worker), a boolean sent as 0, 1 or "yes"."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvaluationRun

SEED_RANGE = (0, 2**31 - 1)  # docs/limits.md

pytestmark = pytest.mark.django_db
TOPIC = "comparing-decimals"


def start(api, **body):
    return api.post("/api/evaluation/start", {"topic_id": TOPIC, "provider": "offline", **body}, format="json")


@pytest.mark.parametrize("seed", [2**63, -(10**23), 2**53, SEED_RANGE[1] + 1, -1])
def test_a_seed_out_of_range_is_400_naming_it(api, catalog, seed):
    response = start(api, persona_file="ace", seed=seed)
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["seed"], response.json()
    assert not EvaluationRun.objects.exists()


def test_the_seed_range_is_what_the_schema_states_and_its_ends_are_taken(api, catalog):
    schema = api.get("/api/schema/?format=json").json()
    seed = schema["components"]["schemas"]["StartInput"]["properties"]["seed"]
    assert (seed["minimum"], seed["maximum"]) == SEED_RANGE, seed
    for end in SEED_RANGE:
        assert start(api, persona_file="ace", seed=end).status_code == 202


def test_the_cli_refuses_a_seed_out_of_range(catalog):
    with pytest.raises(CommandError, match=r"seed: 2147483648 is out of range \(0-2147483647\)"):
        call_command(
            "run_evaluation", "--persona", "ace", "--seed", str(2**31), "--provider", "offline", stdout=StringIO()
        )
    assert not EvaluationRun.objects.exists()


@pytest.mark.parametrize("value", [0, 1, "yes", "true", None])
def test_booleans_are_json_booleans(api, catalog, value):
    started = start(api, persona_file="ace", force_baseline=value)
    assert started.status_code == 400 and list(started.json()["fields"]) == ["force_baseline"], started.json()
    judged = api.post(
        "/api/judging/jobs", {"rubric": "tutor-response", "provider": "offline", "again": value}, format="json"
    )
    assert judged.status_code == 400 and "again" in judged.json()["fields"], judged.json()
    assert not EvaluationRun.objects.exists()
