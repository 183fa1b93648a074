"""Suites inside the app: discovery, background runs from the admin and the API, results pages."""

import contextlib
import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import CacheEntry, CaseResult, EvaluationRun, Suite
from evaluation.providers.loopback import Reply

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


def test_draft_skill_on_a_suite_with_tools_and_write_places_the_draft(tmp_path, monkeypatch):
    """The trial keeps the suite's own place, so `tools: tools.py:add_fractions` still resolves."""
    shutil.copytree(ROOT / "skills" / "fractions", tmp_path / "fractions")
    monkeypatch.chdir(tmp_path)  # another working folder than the project's
    eval_md = tmp_path / "fractions" / "EVAL.md"
    old_skill = (tmp_path / "fractions" / "SKILL.md").read_text()
    out = StringIO()
    args = [str(eval_md), "--out", str(tmp_path / "drafts"), "--rounds", "1", "--model", "offline"]
    call_command("draft_skill", *args, "--judge-model", "offline", stdout=out)
    results = json.loads((tmp_path / "drafts" / "round_1" / "results.json").read_text())
    calls = [c for r in results["cases"] for c in r["transcript"]["tool_calls"]]
    assert calls and all(c["name"] == "add_fractions" and "result" in c for c in calls)  # the tool ran
    assert results["judge"].startswith("offline rule-based judge")
    assert "judge: offline rule-based judge" in out.getvalue() and "--write" in out.getvalue()
    assert (tmp_path / "fractions" / "SKILL.md").read_text() == old_skill  # nothing written without --write

    out = StringIO()
    call_command("draft_skill", *args, "--judge-model", "offline", "--write", stdout=out)
    draft = (tmp_path / "drafts" / "round_1" / "SKILL.md").read_text()
    assert (tmp_path / "fractions" / "SKILL.md").read_text() == draft != old_skill
    assert (tmp_path / "drafts" / "previous_SKILL.md").read_text() == old_skill
    assert f"Wrote {tmp_path / 'fractions' / 'SKILL.md'}" in out.getvalue()


def test_draft_skill_write_refuses_a_suite_whose_skill_is_named_elsewhere(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "EVAL.md").write_text(
        "---\nskills: [skills/greeter]\n---\n## c\n### Prompt\nHi\n### Expect\nGreets.\n"
    )
    with pytest.raises(CommandError, match=r"--write: .*EVAL.md: the suite names skills: in its frontmatter"):
        call_command(
            "draft_skill",
            str(tmp_path / "s" / "EVAL.md"),
            "--out",
            str(tmp_path / "d"),
            "--rounds",
            "1",
            "--model",
            "offline",
            "--judge-model",
            "offline",
            "--write",
            stdout=StringIO(),
        )
    assert not (tmp_path / "s" / "SKILL.md").exists()


def flaky_judge(fail_on):
    """The judge fails the judgements numbered in fail_on (1-based) of the prompt 'Hello there'."""
    base, seen = responder(), {"n": 0}

    def respond(endpoint, body, n):
        reply = base(endpoint, body, n)
        if reply.json is not None and "User prompt\\nHello there" in json.dumps(body.get("messages")):
            seen["n"] += 1
            if seen["n"] in fail_on:
                return Reply(json={"verdict": "FAIL", "reason": "judged FAIL", "warning": None})
        return reply

    return respond


def test_run_suite_repeats_report_pass_k_and_the_interval_and_name_the_judge(loopback):
    loopback.responder = flaky_judge({2})
    model = f"openai/m@{loopback.openai_url}"
    out = StringIO()
    greeter = str(ROOT / "skills" / "greeter")
    with pytest.raises(CommandError, match="1 case\\(s\\) failed"):
        call_command("run_suite", greeter, "--model", model, "--judge-model", model, "--repeats", "3", stdout=out)
    text = out.getvalue()
    assert "FAIL greeter: handles a missing name [repeat 2/3]" in text
    assert "pass^3 PASS greeter: greets the user by name  3/3 passed, mean 1.00 (95% CI 0.44-1.00)" in text
    assert "pass^3 FAIL greeter: handles a missing name  2/3 passed, mean 0.67 (95% CI 0.21-0.94)" in text
    assert "judge: openai/m\n" in text and "1 passed, 1 failed (pass^3)" in text
    # without a judge model the offline judge runs, and the report says so
    out = StringIO()
    with contextlib.suppress(CommandError):  # the offline rules may fail a case; the report is the point
        call_command("run_suite", greeter, "--model", model, stdout=out)
    assert "judge: offline rule-based judge (no judge model set" in out.getvalue()
    with pytest.raises(CommandError, match="--repeats: must be from 1 to 100"):
        call_command("run_suite", greeter, "--repeats", "0", stdout=StringIO())


def test_a_suite_run_with_repeats_through_the_api_and_its_page(
    staff_client, q_sync, loopback, django_capture_on_commit_callbacks
):
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    suite = Suite.objects.get(name="greeter")
    loopback.responder = flaky_judge({3})
    model = f"openai/m@{loopback.openai_url}"
    body = {"model": model, "judge_model": model, "repeats": 3}
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(f"/api/suites/{suite.pk}/run", json.dumps(body), content_type="application/json")
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(kind="suite")
    assert run.status == "completed" and run.overall_score == 0.5
    assert run.detail == "1/2 cases pass^3; judge: openai/m"
    detail = staff_client.get(f"/api/suites/runs/{run.run_id}").json()
    assert detail["repeats"] == 3 and detail["judged_by"] == "openai/m"
    assert detail["cases"] == [
        {
            "case": "greets the user by name",
            "k": 3,
            "passes": 3,
            "pass_k": True,
            "mean": 1.0,
            "ci_low": 0.439,
            "ci_high": 1.0,
        },
        {
            "case": "handles a missing name",
            "k": 3,
            "passes": 2,
            "pass_k": False,
            "mean": 0.667,
            "ci_low": 0.208,
            "ci_high": 0.939,
        },
    ]
    assert [(r["case"][:5], r["repeat"], r["passed"]) for r in detail["results"]] == [
        ("greet", 1, True),
        ("greet", 2, True),
        ("greet", 3, True),
        ("handl", 1, True),
        ("handl", 2, True),
        ("handl", 3, False),
    ]
    assert {r["agent_model"] for r in detail["results"]} == {"openai/m"}
    page = staff_client.get(f"/admin/evaluation/suites/runs/{run.run_id}/").content.decode()
    assert "pass^3" in page and "2/3" in page and "0.67 (0.21-0.94)" in page
    assert '<span class="judge">openai/m</span>' in page
    too_many = staff_client.post(
        f"/api/suites/{suite.pk}/run", json.dumps({"repeats": 21}), content_type="application/json"
    )
    assert too_many.status_code == 400 and "repeats" in too_many.json()["fields"]


def test_the_suite_run_page_says_when_the_offline_judge_ran(
    staff_client, q_sync, loopback, django_capture_on_commit_callbacks
):
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    suite = Suite.objects.get(name="greeter")
    loopback.responder = responder()
    body = {"model": f"openai/m@{loopback.openai_url}"}
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(f"/api/suites/{suite.pk}/run", json.dumps(body), content_type="application/json")
    run = EvaluationRun.objects.get(kind="suite")
    page = staff_client.get(f"/admin/evaluation/suites/runs/{run.run_id}/").content.decode()
    assert '<span class="judge">offline rule-based judge (no judge model set' in page
    assert staff_client.get(f"/api/suites/runs/{run.run_id}").json()["judged_by"].startswith("offline rule-based judge")


def test_the_admin_shows_each_results_repeat_and_models(admin_client):
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    suite = Suite.objects.get(name="greeter")
    run = EvaluationRun.objects.create(run_id="suite_x", kind="suite", status="completed")
    from evaluation.models import SuiteRun

    SuiteRun.objects.create(run=run, suite=suite, suite_path=suite.path, repeats=2)
    result = CaseResult.objects.create(
        run=run, case=suite.cases.first(), passed=True, repeat=2, agent_model="openai/a", judge_model="openai/j"
    )
    listing = admin_client.get("/admin/evaluation/caseresult/").content.decode()
    assert "openai/j" in listing
    change = admin_client.get(f"/admin/evaluation/caseresult/{result.pk}/change/").content.decode()
    assert "openai/a" in change and "openai/j" in change
    assert ">2</td>" in admin_client.get("/admin/evaluation/suiterun/").content.decode()  # the repeats column
