"""Suites inside the app: discovery, background runs from the admin and the API, results pages."""

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import CacheEntry, CaseResult, EvaluationRun, Suite

from .test_runner_and_cache import responder

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.fixture
def q_sync(monkeypatch):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


def test_discover_stores_suites_and_cases_and_reports_bad_files(tmp_path):
    shutil.copytree(ROOT / "skills", tmp_path / "skills")
    (tmp_path / "skills" / "broken.eval.md").write_text("## no sections\n")
    err = StringIO()
    with pytest.raises(CommandError, match="1 suite file"):
        call_command("discover_suites", str(tmp_path / "skills"), stdout=StringIO(), stderr=err)
    assert "broken.eval.md:1: case 'no sections': the Prompt section is missing" in err.getvalue()
    assert Suite.objects.count() == 3
    greeter = Suite.objects.get(name="greeter")
    assert list(greeter.cases.values_list("name", flat=True)) == ["greets the user by name", "handles a missing name"]


def test_admin_action_runs_a_suite_and_the_cache_lands_in_the_database(
    staff_client, q_sync, loopback, django_capture_on_commit_callbacks
):
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    suite = Suite.objects.get(name="greeter")
    loopback.responder = responder(verdicts={"User prompt\\nHello there": "FAIL"})
    from evaluation.models import LLMConfig

    LLMConfig.objects.create(role="suite_agent", provider="openai", model="m", base_url=loopback.openai_url)
    LLMConfig.objects.create(role="suite_judge", provider="openai", model="j", base_url=loopback.openai_url)
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            "/admin/evaluation/suite/", {"action": "run_suites", "_selected_action": [suite.pk]}
        )
    assert response.status_code == 302
    run = EvaluationRun.objects.get(kind="suite")
    assert run.status == "completed" and run.detail == "1/2 passed" and run.overall_score == 0.5
    results = {r.case.name: r for r in CaseResult.objects.filter(run=run)}
    assert results["greets the user by name"].passed and not results["handles a missing name"].passed
    assert CacheEntry.objects.count() == 1  # only the pass
    page = staff_client.get(f"/admin/evaluation/suites/runs/{run.run_id}/").content.decode()
    assert "1/2 passed" in page and "FAIL" in page and "Hello Sam" in page


def test_api_runs_a_suite_in_the_background(staff_client, q_sync, loopback, django_capture_on_commit_callbacks):
    call_command("discover_suites", str(ROOT / "skills" / "fractions"), stdout=StringIO())
    suite = Suite.objects.get(name="fractions")
    loopback.responder = responder()
    model = f"openai/m@{loopback.openai_url}"
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            f"/api/suites/{suite.pk}/run",
            json.dumps({"model": model, "judge_model": model}),
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    detail = staff_client.get(f"/api/suites/runs/{response.json()['run_id']}").json()
    assert detail["run_status"] == "completed" and [r["passed"] for r in detail["results"]] == [True, True]
    assert detail["results"][0]["transcript"]["tool_calls"][0]["result"] == "3/4"
    listing = staff_client.get("/api/suites").json()["results"]
    assert listing[0]["name"] == "fractions" and listing[0]["cases"] == 2
    assert staff_client.post("/api/suites/999/run", "{}", content_type="application/json").status_code == 404
    bad = staff_client.post(
        f"/api/suites/{suite.pk}/run", json.dumps({"model": "gemini/x"}), content_type="application/json"
    )
    assert bad.status_code == 400 and "model" in bad.json()["error"]


def test_draft_skill_keeps_every_round(tmp_path):
    out = StringIO()
    call_command(
        "draft_skill",
        str(ROOT / "skills" / "greeter" / "EVAL.md"),
        "--out",
        str(tmp_path),
        "--rounds",
        "2",
        "--model",
        "offline",
        "--judge-model",
        "offline",
        stdout=out,
    )
    rounds = sorted(p.name for p in tmp_path.iterdir())
    assert rounds[0] == "round_1" and all(
        (tmp_path / r / "SKILL.md").is_file() and (tmp_path / r / "results.json").is_file() for r in rounds
    )
    draft = (tmp_path / "round_1" / "SKILL.md").read_text()
    assert "greets the user by their name" in draft  # the offline author writes one instruction per rubric
    assert "round 1:" in out.getvalue() and "Best draft:" in out.getvalue()


def test_run_suite_command_exit_status(tmp_path, loopback):
    loopback.responder = responder(verdicts={"User prompt\\nHello there": "FAIL"})
    model = f"openai/m@{loopback.openai_url}"
    out = StringIO()
    with pytest.raises(CommandError, match="1 case\\(s\\) failed"):
        call_command(
            "run_suite", str(ROOT / "skills" / "greeter"), "--model", model, "--judge-model", model, stdout=out
        )
    assert "PASS greeter: greets the user by name" in out.getvalue() and "1 passed, 1 failed" in out.getvalue()
    with pytest.raises(CommandError, match="no EVAL.md"):
        call_command("run_suite", str(tmp_path), stdout=StringIO())


def test_run_suite_reports_a_suite_whose_tools_cannot_be_imported_and_runs_the_others(tmp_path, loopback):
    shutil.copytree(ROOT / "skills", tmp_path / "skills")
    broken = tmp_path / "skills" / "broken"
    broken.mkdir()
    # A tool module that needs configuration it does not find: a KeyError while importing.
    (broken / "tools.py").write_text(
        "import os\nTOKEN = os.environ['BROKEN_TOOL_TOKEN']\n\ndef f(x: int) -> int:\n    return x\n"
    )
    (broken / "EVAL.md").write_text("---\ntools: tools.py:f\n---\n## uses f\n### Prompt\nf of 2\n### Expect\n2\n")
    (tmp_path / "skills" / "zeta").mkdir()
    (tmp_path / "skills" / "zeta" / "EVAL.md").write_text("## says hello\n### Prompt\nHi\n### Expect\nGreets.\n")
    loopback.responder = responder()
    model = f"openai/m@{loopback.openai_url}"
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="suite error") as failure:
        call_command(
            "run_suite", str(tmp_path / "skills"), "--model", model, "--judge-model", model, stdout=out, stderr=err
        )
    expected = f"{broken / 'EVAL.md'}: tools: cannot import tools.py (KeyError: 'BROKEN_TOOL_TOKEN')"
    assert f"ERROR {expected}" in err.getvalue() and expected in str(failure.value)
    # the suites before and after the broken one all ran
    ran = [line.split("  [")[0] for line in out.getvalue().splitlines() if line.startswith(("PASS", "FAIL"))]
    assert "PASS fractions: adds fractions with the tool" in ran and "PASS greeter: greets the user by name" in ran
    assert "PASS zeta: says hello" in ran
    assert "6 passed, 0 failed, 1 error" in out.getvalue()
