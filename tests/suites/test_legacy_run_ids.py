"""A suite run stored before run ids were slugged (`suite_..._x/y`) still opens everywhere."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.models import EvaluationRun, Suite, SuiteRun

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.fixture
def legacy_run(db):
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    suite = Suite.objects.get(name="greeter")
    # Created directly, as old data: today's run_create would slug the '/' away.
    run = EvaluationRun.objects.create(
        run_id="suite_20250101_000000_x/y", kind="suite", status="completed", detail="2/2 passed"
    )
    SuiteRun.objects.create(run=run, suite=suite, suite_path=suite.path)
    return run


def test_the_suite_list_links_an_old_run_by_its_uuid(admin_client, legacy_run):
    admin_client.raise_request_exception = False
    page = admin_client.get("/admin/evaluation/suite/")
    assert page.status_code == 200
    link = f"/admin/evaluation/suites/runs/{legacy_run.pk}/"
    assert f'href="{link}"' in page.content.decode()
    report = admin_client.get(link)
    assert report.status_code == 200 and "suite_20250101_000000_x/y" in report.content.decode()


def test_the_admin_change_pages_render(admin_client, legacy_run):
    admin_client.raise_request_exception = False
    for url in (
        f"/admin/evaluation/evaluationrun/{legacy_run.pk}/change/",
        f"/admin/evaluation/suiterun/{legacy_run.pk}/change/",
        "/admin/evaluation/evaluationrun/",
        "/admin/evaluation/suiterun/",
    ):
        assert admin_client.get(url).status_code == 200, url
    change = admin_client.get(f"/admin/evaluation/evaluationrun/{legacy_run.pk}/change/").content.decode()
    assert f'href="/admin/evaluation/runs/{legacy_run.pk}/"' in change  # the report link
