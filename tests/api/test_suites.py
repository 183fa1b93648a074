"""EVAL.md suites through the API: the list, one suite, starting a run and reading its results."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.models import EvaluationRun, Suite, SuiteRun

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def suites(db):
    call_command("discover_suites", str(ROOT / "skills"), stdout=StringIO())
    return {s.name: s for s in Suite.objects.all()}


def test_list_and_detail(api, suites):
    listing = api.get("/api/suites").json()
    assert listing["count"] == len(suites) >= 2
    fractions = next(s for s in listing["results"] if s["name"] == "fractions")
    assert fractions == {
        "id": suites["fractions"].pk,
        "name": "fractions",
        "path": "skills/fractions/EVAL.md",
        "cases": suites["fractions"].cases.count(),
    }
    assert api.get("/api/suites?name=fractions").json()["count"] == 1
    detail = api.get(f"/api/suites/{fractions['id']}").json()
    lines = [c["line"] for c in detail["case_list"]]
    assert len(lines) == fractions["cases"] and lines == sorted(lines) and detail["case_list"][0]["expect"]
    assert api.get("/api/suites/99999").status_code == 404


def test_run_start_and_detail(api, suites, django_capture_on_commit_callbacks):
    suite = suites["greeter"]
    with django_capture_on_commit_callbacks() as queued:
        response = api.post(f"/api/suites/{suite.pk}/run", {"model": "offline", "judge": False}, format="json")
    assert response.status_code == 202 and len(queued) == 1
    run_id = response.json()["run_id"]
    detail = api.get(f"/api/suites/runs/{run_id}").json()
    assert detail["run_status"] == "queued" and detail["kind"] == "suite" and detail["results"] == []
    assert detail["passed_share"] is None
    assert api.get("/api/suites/runs/run_nope").status_code == 404


def test_run_refuses_missing_keys_and_unknown_suites(api, suites, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    suite = suites["greeter"]
    response = api.post(f"/api/suites/{suite.pk}/run", {"judge_model": "anthropic"}, format="json")
    assert response.status_code == 400 and "ANTHROPIC_API_KEY" in response.json()["fields"]["judge_model"][0]
    # without a judge, the judge's key does not matter
    assert (
        api.post(f"/api/suites/{suite.pk}/run", {"judge_model": "anthropic", "judge": False}, format="json").status_code
        == 202
    )
    assert api.post("/api/suites/99999/run", {}, format="json").status_code == 404
    assert EvaluationRun.objects.filter(kind="suite").count() == 1


def test_an_old_run_id_with_a_slash_still_answers(api, suites):
    """Stored before run ids were slugged: the API finds it by its UUID and lists it, never a 500."""
    api.raise_request_exception = False
    run = EvaluationRun.objects.create(run_id="suite_20250101_000000_x/y", kind="suite", status="completed")
    SuiteRun.objects.create(run=run, suite=suites["greeter"], suite_path=suites["greeter"].path)
    detail = api.get(f"/api/suites/runs/{run.pk}")
    assert detail.status_code == 200 and detail.json()["run_id"] == "suite_20250101_000000_x/y"
    listing = api.get("/api/evaluation/runs")
    assert listing.status_code == 200
    assert "suite_20250101_000000_x/y" in [r["run_id"] for r in listing.json()["results"]]
    assert api.get(f"/api/evaluation/runs/{run.pk}").status_code == 200
