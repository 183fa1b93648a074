"""A failed suite run shows paths relative to the suite folders, never the server's absolute paths."""

import json
from pathlib import Path

import pytest

from evaluation.models import CaseResult, EvaluationRun, Suite
from evaluation.suites.scope import SuiteScope

from .test_runner_and_cache import responder


@pytest.fixture
def suites(settings, tmp_path):
    folder = tmp_path / "srv" / "evals"
    (folder / "greeter").mkdir(parents=True)
    settings.EVALUATION = {**settings.EVALUATION, "SUITE_DIRS": [folder], "SUITE_TOOL_PACKAGES": []}
    return folder


def start(client, suite, loopback):
    loopback.responder = responder()
    model = f"openai/m@{loopback.openai_url}"
    return client.post(
        f"/api/suites/{suite.pk}/run",
        json.dumps({"model": model, "judge_model": model}),
        content_type="application/json",
    )


@pytest.mark.django_db
def test_a_broken_suite_file_fails_the_run_naming_it_relative_to_its_folder(
    suites, tmp_path, staff_client, q_sync, loopback, django_capture_on_commit_callbacks
):
    path = suites / "greeter" / "EVAL.md"
    path.write_text("---\nname: greeter\n## c\n### Prompt\np\n### Expect\ne\n")  # frontmatter never closed
    suite = Suite.objects.create(path=str(path), name="greeter")
    with django_capture_on_commit_callbacks(execute=True):
        assert start(staff_client, suite, loopback).status_code == 202
    run = EvaluationRun.objects.get(kind="suite")
    assert run.status == "failed"
    assert run.error.startswith("evals/greeter/EVAL.md:1: frontmatter opened with '---' is never closed"), run.error
    assert str(tmp_path) not in run.error
    detail = staff_client.get(f"/api/evaluation/runs/{run.run_id}").json()
    assert str(tmp_path) not in json.dumps(detail["error"]) and str(tmp_path) not in json.dumps(detail["status_detail"])


@pytest.mark.django_db
def test_a_missing_agent_names_where_it_looked_relative_to_the_folders(
    suites, tmp_path, staff_client, q_sync, loopback, django_capture_on_commit_callbacks
):
    path = suites / "greeter" / "EVAL.md"
    path.write_text("---\nagent: nowhere\n---\n## c\n### Prompt\np\n### Expect\ne\n")
    suite = Suite.objects.create(path=str(path), name="greeter")
    with django_capture_on_commit_callbacks(execute=True):
        assert start(staff_client, suite, loopback).status_code == 202
    run = EvaluationRun.objects.get(kind="suite")
    assert run.status == "failed", run.error
    assert str(tmp_path) not in run.error and "evals/greeter/EVAL.md" in run.error, run.error
    assert str(tmp_path) not in json.dumps(list(CaseResult.objects.values("checks", "warnings")))


def test_shown_paths_inside_the_project_read_as_the_admin_shows_them():
    root = Path("/srv/app")
    scope = SuiteScope(folders=(root / "skills", Path("/data/evals")), packages=(), root=root)
    assert scope.shown_paths("/srv/app/skills/greeter/EVAL.md:3: bad") == "skills/greeter/EVAL.md:3: bad"
    assert scope.shown_paths("cannot read /data/evals/x/tools.py (gone)") == "cannot read evals/x/tools.py (gone)"
    assert scope.shown_paths("in /srv/app/evaluation/x.py") == "in evaluation/x.py"
    assert scope.shown_paths("/srv/app/skills2/a") == "skills2/a"  # a sibling is not inside the folder
    assert scope.shown_paths("no path here") == "no path here"


@pytest.mark.django_db
def test_a_case_detail_masks_url_credentials(suites, staff_client, q_sync, django_capture_on_commit_callbacks):
    path = suites / "greeter" / "EVAL.md"
    path.write_text("---\nmodel: nope/x@http://user:pw@127.0.0.1:9/v1\n---\n## c\n### Prompt\np\n### Expect\ne\n")
    suite = Suite.objects.create(path=str(path), name="greeter")
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            f"/api/suites/{suite.pk}/run", json.dumps({"judge": False}), content_type="application/json"
        )
    assert response.status_code == 202, response.content
    stored = json.dumps(list(CaseResult.objects.values("checks", "warnings")))
    assert "nope/x@http://***@127.0.0.1:9/v1" in stored, stored
    assert "user:pw" not in stored
