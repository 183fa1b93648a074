"""The drift pages read the baseline drift_run compares with (baselines/<agent>.json): the shipped baseline
of rex shows on the drift index and on rex's page, with the change per dimension that drift_run prints, on a
fresh install where no run was ever recorded as a baseline in the database."""

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.drift.baselines import read_baseline
from evaluation.models import EvaluationRun

ROOT_BASELINES = "baselines"


def cells(html: str, row_id: str) -> list[str]:
    row = re.search(rf'<tr id="{row_id}">(.*?)</tr>', html, re.S)
    assert row, row_id
    return [
        re.sub(r"<[^>]+>|\s+", " ", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row.group(1), re.S)
    ]


@pytest.mark.django_db
def test_the_pages_show_the_baseline_file_drift_run_compares_with(staff_client, catalog, settings):
    out = StringIO()
    try:
        call_command("drift_run", mode="synthetic", judge="offline", agents="rex", rounds=2, stdout=out)
    except CommandError:
        pass  # regressions exit 1; the comparison is what this test reads
    run = EvaluationRun.objects.get(kind="drift", agent_id="rex")
    assert not run.drift.is_baseline  # no baseline run in the database: only the shipped file
    shipped = read_baseline(settings.BASE_DIR / ROOT_BASELINES, "rex")
    assert shipped is not None
    latest = {s.dimension: s.score for s in run.dimension_scores.all()}
    adherence = round(latest["adherence"] - shipped.dimensions["adherence"], 2)
    overall = round(run.overall_score - sum(shipped.dimensions.values()) / len(shipped.dimensions), 2)

    index = staff_client.get("/admin/evaluation/drift/").content.decode()
    row = cells(index, "drift-rex")
    assert row[3].startswith(f"{sum(shipped.dimensions.values()) / len(shipped.dimensions):.2f}"), row
    assert row[4] == f"{overall:+.2f}", row

    page = staff_client.get("/admin/evaluation/drift/rex/").content.decode()
    assert "No baseline" not in page
    assert "Baseline <code>baselines/rex.json</code>" in page
    table = re.search(r'<table class="cases" id="drift-changes">(.*?)</table>', page, re.S)
    assert table, page
    first = [
        re.sub(r"<[^>]+>", "", c).strip()
        for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", table.group(1).split("<tbody>")[1].split("</tr>")[0])
    ]
    assert first == [
        "Adherence",
        f"{shipped.dimensions['adherence']:.2f}",
        f"{latest['adherence']:.2f}",
        f"{adherence:+.2f}",
    ], first


@pytest.mark.django_db
def test_an_agent_without_a_baseline_file_says_how_to_record_one(staff_client, catalog, settings, tmp_path):
    settings.EVALUATION = {**settings.EVALUATION, "BASELINES_DIR": tmp_path}
    page = staff_client.get("/admin/evaluation/drift/rex/").content.decode()
    assert "No baseline file" in page and "drift_baseline --agents rex" in page
    (tmp_path / "rex.json").write_text("{not json")
    page = staff_client.get("/admin/evaluation/drift/rex/").content.decode()
    assert "cannot be read" in page and "not valid JSON" in page
    assert "unreadable" in staff_client.get("/admin/evaluation/drift/").content.decode()
