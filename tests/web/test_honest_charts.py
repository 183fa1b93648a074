"""Charts and numbers that say what the data says: a time axis, one series per judge, bars for one period,
intervals inside the scale with n, the same usage on every page, and the drift page's baseline and delta."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from evaluation.drift.selectors import reasoning_items
from evaluation.models import Agent, DimensionScore, DriftRun, EvaluationRun, Persona, PropositionScore, Topic
from evaluation.tutoring.reports import comparison_data, shown_interval, write_comparison
from evaluation.tutoring.selectors import score_trends
from evaluation.web.charts import lines

pytestmark = pytest.mark.django_db


def xs_of(svg: str) -> list[float]:
    return [float(x) for x in re.findall(r'<circle cx="([0-9.]+)"', svg)]


def test_points_sit_at_their_time_not_evenly():
    times = [datetime(2026, 11, 26, 23, m, tzinfo=UTC) for m in (24, 48, 50)]
    svg = lines({"pacing": [5.0, 6.0, 7.0]}, ["23:24", "23:48", "23:50"], times=times)
    a, b, c = xs_of(svg)
    assert (b - a) / (c - b) == pytest.approx(24 / 2, rel=0.01)
    # the axis is marked at round times (every 10 minutes over 26), the date on the first mark
    assert re.findall(r'class="x-label"[^>]*>([^<]+)<', svg) == ["11-26 23:30", "23:40", "23:50"]
    ticks = [float(x) for x in re.findall(r'class="x-tick" x1="([0-9.]+)"', svg)]
    assert ticks[2] == pytest.approx(c, abs=0.1) and ticks[0] == pytest.approx(a + (c - a) * 6 / 26, abs=0.1)
    assert "<title>pacing, 23:48: 6</title>" in svg  # each point's own time in its tooltip


def test_runs_seconds_apart_get_marks_seconds_apart_and_distinct_labels():
    times = [datetime(2026, 11, 28, 13, 3, s, tzinfo=UTC) for s in (12, 22)]
    svg = lines({"adherence": [6.0, 6.5]}, ["11-28 13:03", "11-28 13:03"], times=times)
    labels = re.findall(r'class="x-label"[^>]*>([^<]+)<', svg)
    assert labels == ["11-28 13:03:12", "13:03:14", "13:03:16", "13:03:18", "13:03:20", "13:03:22"], labels


def test_a_value_axis_up_to_56_is_marked_every_10():
    svg = lines({"pacing": [56.0, 3.0]}, ["2026-W46", "2026-W47"], scale=56.0)
    assert re.findall(r'text-anchor="end">(\d+)<', svg) == ["0", "10", "20", "30", "40", "50"]
    bars = lines({"pacing": [56.0]}, ["2026-W47"], scale=56.0)
    assert re.findall(r'text-anchor="end">(\d+)<', bars) == ["0", "10", "20", "30", "40", "50"]


def test_one_period_is_drawn_as_bars():
    svg = lines({"pacing": [6.0], "authenticity": [4.0]}, ["2026-W47"], scale=9.0)
    assert "<circle" not in svg
    assert svg.count("<title>") == 2 and "<title>pacing / 2026-W47: 6</title>" in svg


def test_intervals_stay_on_the_scale_and_are_not_drawn_below_three_runs():
    assert shown_interval((-13.56, 24.56), 2) == (None, None)
    assert shown_interval((-1.5, 8.25), 3) == (0.0, 8.25)
    assert shown_interval((4.0, 11.0), 4) == (4.0, 10.0)
    runs = [
        {"run_id": f"r{i}", "persona_id": "ace", "status": "completed", "scores": {"pacing": s}, "avg_score": s}
        for i, s in enumerate((1.0, 10.0))
    ]
    data = comparison_data(runs, min_coverage=0.0)
    assert data["personas"]["ace"]["n"] == {"pacing": 2}


def test_the_comparison_markdown_shows_no_interval_off_the_scale(tmp_path):
    runs = [
        {"run_id": f"r{i}", "persona_id": "ace", "status": "completed", "scores": {"pacing": s}, "avg_score": s}
        for i, s in enumerate((1.0, 10.0))
    ]
    write_comparison(tmp_path, "g", runs, min_coverage=0.0)
    text = (tmp_path / "comparison.md").read_text()
    assert "5.5 n=2" in text and "-" + "13" not in text and "[" not in text.split("| ace |")[1].split("\n")[0]


def make_scored(run_id, judge, minutes_ago, score, catalog_persona="ace"):
    run = EvaluationRun.objects.create(
        run_id=run_id,
        persona=Persona.objects.get(persona_id=catalog_persona),
        topic=Topic.objects.filter(approved=True).first(),
        status="completed",
        stage="completed",
        overall_score=score,
        judge_label=judge,
    )
    EvaluationRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    DimensionScore.objects.create(run=run, dimension="pacing", score=score, analysis="")
    return run


def test_runs_of_different_judges_are_separate_series(catalog):
    make_scored("judge_a_1", "openai/gpt-judge", 30, 8.0)
    make_scored("judge_b_1", "offline/offline-rules-v1", 20, 2.0)
    trends = score_trends({})
    assert trends.judges == ["offline/offline-rules-v1", "openai/gpt-judge"]
    assert set(trends.over_time) == {"pacing · offline/offline-rules-v1", "pacing · openai/gpt-judge"}
    # no 5.0: the two judges' scores were not averaged anywhere
    assert all(v in (None, 2.0, 8.0) for values in trends.over_time.values() for v in values)
    assert {round(d["pacing"], 1) for d in trends.by_tutor.values()} == {2.0, 8.0}
    assert len(trends.moments) == len(trends.times) == 2 and trends.moments[0] < trends.moments[1]


def test_the_charts_page_names_the_judges(staff_client, catalog):
    make_scored("judge_a_2", "openai/gpt-judge", 30, 8.0)
    make_scored("judge_b_2", "offline/offline-rules-v1", 20, 2.0)
    html = staff_client.get("/admin/evaluation/charts/").content.decode()
    assert "Judged by offline/offline-rules-v1, openai/gpt-judge" in html
    assert "Pacing · openai/gpt-judge" in html


def test_the_report_shows_the_recorded_usage_of_an_offline_run(staff_client, catalog):
    run = make_scored("usage_offline", "offline/offline-rules-v1", 5, 6.0)
    EvaluationRun.objects.filter(pk=run.pk).update(
        token_usage={"calls": 14, "input_tokens": 11567, "output_tokens": 2048, "by_provider": {"offline": 14}}
    )
    line = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode().split('class="usage-line">')[1]
    line = line.split("</p>")[0]
    assert line.startswith("Offline: no LLM was called")
    assert "no tokens" not in line
    assert "14 calls to the offline provider · 11,567 input tokens · 2,048 output tokens" in line


def test_the_drift_page_shows_baseline_delta_and_readable_reasoning(staff_client, catalog, settings, tmp_path):
    agent = Agent.objects.filter(kind=Agent.Kind.CHARACTER).first()
    (tmp_path / f"{agent.pk}.json").write_text('{"dimensions": {"voice": 6.0}}')
    settings.EVALUATION = {**settings.EVALUATION, "BASELINES_DIR": tmp_path}  # the file drift_run compares with
    runs = []
    for i, score in enumerate((6.0, 4.5)):
        run = EvaluationRun.objects.create(
            run_id=f"drift_delta_{i}",
            kind="drift",
            source="drift",
            agent=agent,
            status="completed",
            overall_score=score,
            judge_label="offline/offline-rules-v1",
        )
        EvaluationRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=2 - i))
        runs.append(run)
    DriftRun.objects.create(run=runs[0], is_baseline=True)
    PropositionScore.objects.create(
        evaluation_run=runs[1],
        dimension="voice",
        proposition_id="warm_greeting",
        score=2,
        reasoning="[offline rule-based judge] shares ['hello', 'warm'] with the claim | second check",
    )
    html = staff_client.get(f"/admin/evaluation/drift/{agent.pk}/").content.decode()
    assert 'overall 6.00 · latest run 4.50 · change <b class="delta">-1.50</b>' in html
    assert "[&#x27;hello&#x27;" not in html and "['hello'" not in html
    assert '<ul class="reasoning"><li>[offline rule-based judge] shares hello, warm with the claim</li>' in html


def test_reasoning_items_write_list_literals_as_words():
    assert reasoning_items("cues present: ['a', 'b'], absent: none | x") == ["cues present: a, b, absent: none", "x"]
