"""The dashboard's problem trends: problems by root cause per week and per tutor, from completed tutor runs."""

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation.models import Agent, EvaluationRun, Problem
from evaluation.runs.selectors import problem_trends

pytestmark = pytest.mark.django_db


def run_with(run_id, *, weeks_ago, causes, agent=None, status="completed", kind="tutor"):
    run = EvaluationRun.objects.create(run_id=run_id, status=status, stage=status, kind=kind, agent=agent)
    EvaluationRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(weeks=weeks_ago))
    for rank, cause in enumerate(causes, 1):
        Problem.objects.create(run=run, rank=rank, title=cause, severity="major", root_cause=cause)


@pytest.fixture
def history():
    v2 = Agent.objects.create(id="tutor-v2", display_name="Tutor v2", kind="openai_chat", model="gpt-x")
    run_with("old", weeks_ago=3, causes=["wrong_pacing", "wrong_pacing", "missed_student_signal"])
    run_with("new", weeks_ago=0, causes=["wrong_pacing"], agent=v2)
    run_with("failed", weeks_ago=0, causes=["other"], status="failed")
    run_with("drift", weeks_ago=0, causes=["other"], kind="drift")
    run_with("ancient", weeks_ago=20, causes=["other"])


def test_problems_are_counted_by_root_cause_per_week_and_per_tutor(history):
    trends = problem_trends()
    assert trends.runs == 2 and len(trends.weeks) == 2
    assert trends.by_week == {"missed_student_signal": [1, 0], "wrong_pacing": [2, 1]}
    assert trends.by_tutor == {
        "Reference tutor": {"wrong_pacing": 2, "missed_student_signal": 1},
        "Tutor v2 (gpt-x)": {"wrong_pacing": 1},
    }


def test_the_dashboard_draws_the_trend(staff_client, history):
    html = staff_client.get("/admin/evaluation/").content.decode()
    assert 'id="problem-trends"' in html and 'aria-label="Problems per week by root cause"' in html
    assert "<th>Tutor v2 (gpt-x)</th><td>0</td><td>1</td>" in html  # missed_student_signal, wrong_pacing


def test_no_problems_yet(staff_client):
    assert "No problems found in completed tutor runs" in staff_client.get("/admin/evaluation/").content.decode()
