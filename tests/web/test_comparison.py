"""The comparison page keeps runs of different judges apart: a row and a chart series per judge, no mean
across judges, and a note that says why."""

import re

import pytest

from evaluation.models import DimensionScore, EvaluationRun, Persona, Topic

pytestmark = pytest.mark.django_db

GROUP = "two_judges"
STRICT, LENIENT = "openai/gpt-judge", "offline/offline-rules-v1"


def make_group(group, judged):
    """Completed runs of one group: judged is [(persona_id, judge, pacing score), ...]."""
    topic = Topic.objects.filter(approved=True).first()
    for index, (persona_id, judge, score) in enumerate(judged):
        run = EvaluationRun.objects.create(
            run_id=f"{group}_{index}",
            persona=Persona.objects.get(persona_id=persona_id),
            topic=topic,
            status="completed",
            stage="completed",
            overall_score=score,
            judge_label=judge,
            group=group,
            repeat_index=index,
            max_turns=4,
        )
        DimensionScore.objects.create(run=run, dimension="pacing", score=score, analysis="")


def heat_rows(html):
    table = html.split('<table class="heat">')[1].split("</table>")[0]
    body = table.split("<tbody>")[1]
    return [re.sub(r"<[^>]+>", "|", row) for row in body.split("</tr>") if "<th>" in row]


def test_runs_of_two_judges_in_one_group_are_shown_apart(staff_client, catalog):
    make_group(GROUP, [("ace", STRICT, s) for s in (2.0, 3.0, 4.0)] + [("ace", LENIENT, s) for s in (8.0, 9.0, 10.0)])
    html = staff_client.get(f"/admin/evaluation/comparisons/{GROUP}/").content.decode()
    rows = heat_rows(html)
    assert len(rows) == 2, rows
    lenient, strict = rows  # a persona's rows in the judges' name order
    # each judge's own mean: (8 + 9 + 10) / 3 and (2 + 3 + 4) / 3, never the 6.0 of all six runs
    assert "Arjun" in lenient and LENIENT in lenient and "9.0 ± 0.8" in lenient
    assert "Arjun" in strict and STRICT in strict and "3.0 ± 0.8" in strict
    assert "6.0" not in "".join(rows)
    assert "<th>judge</th>" in html
    assert 'id="split-by-judge"' in html and f"Judged by {LENIENT}, {STRICT}" in html
    assert html.count("1 persona, judged by 2 judges") == 1
    # the chart: one series per persona and judge, named as people read them
    chart = html.split('<div class="chart-wrap">')[1].split("</div>")[0]
    assert f"Arjun · {STRICT}" in chart and f"Arjun · {LENIENT}" in chart
    # the runs list says which judge scored each run
    runs = html.split('<ul class="group-runs">')[1].split("</ul>")[0]
    assert runs.count(f"Arjun · {STRICT}:") == 3 and runs.count(f"Arjun · {LENIENT}:") == 3


def test_a_group_of_one_judge_has_no_judge_column(staff_client, catalog):
    make_group("one_judge", [("ace", STRICT, 4.0), ("struggler", STRICT, 6.0)])
    html = staff_client.get("/admin/evaluation/comparisons/one_judge/").content.decode()
    rows = heat_rows(html)
    assert len(rows) == 2 and "Arjun" in rows[0] and "Priya" in rows[1]
    assert "<th>judge</th>" not in html and 'id="split-by-judge"' not in html
    # the one judge is named all the same, and an offline judge is said to be one
    assert f'2 personas, judged by <span class="judge" id="comparison-judge">{STRICT}</span>.' in html
    make_group("offline_judge", [("ace", LENIENT, 4.0)])
    html = staff_client.get("/admin/evaluation/comparisons/offline_judge/").content.decode()
    assert f'judged by <span class="judge" id="comparison-judge">{LENIENT} (the offline rule-based judge' in html


def test_a_failed_run_without_a_judge_stays_out_of_the_judges_rows(staff_client, catalog):
    make_group("with_failure", [("ace", STRICT, 4.0), ("ace", LENIENT, 8.0)])
    EvaluationRun.objects.create(
        run_id="with_failure_x",
        persona=Persona.objects.get(persona_id="ace"),
        topic=Topic.objects.filter(approved=True).first(),
        status="failed",
        stage="failed",
        group="with_failure",
        repeat_index=9,
    )
    html = staff_client.get("/admin/evaluation/comparisons/with_failure/").content.decode()
    rows = heat_rows(html)
    assert len(rows) == 3, rows
    assert LENIENT in rows[0] and "8.0" in rows[0] and STRICT in rows[1] and "4.0" in rows[1]
    assert "not judged" in rows[2] and "failed" in rows[2]
