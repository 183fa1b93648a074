"""The drift page's chart legend names each line as people read it: "Adherence", not `adherence`."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation.models import Agent, DimensionScore, EvaluationRun

pytestmark = pytest.mark.django_db

LEGEND = re.compile(
    r'<rect x="[0-9.]+" y="[0-9.-]+" width="10" height="10" fill="#[0-9a-f]+"/><text [^>]*>([^<]+)</text>'
)


def drift_runs(agent: Agent, judges: tuple[str, ...]) -> None:
    """Two completed drift runs per judge, scored on adherence and consistency, an hour apart."""
    for i, judge in enumerate(judges * 2):
        run = EvaluationRun.objects.create(
            run_id=f"drift_legend_{i}",
            kind="drift",
            source="drift",
            agent=agent,
            status="completed",
            overall_score=5.0,
            judge_label=judge,
        )
        EvaluationRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=4 - i))
        DimensionScore.objects.create(run=run, dimension="adherence", score=6.0)
        DimensionScore.objects.create(run=run, dimension="consistency", score=4.0 + i)


def legend(staff_client, agent: Agent) -> list[str]:
    response = staff_client.get(f"/admin/evaluation/drift/{agent.pk}/")
    assert response.status_code == 200
    svg = response.context["chart"]
    assert svg, "the page drew no chart"
    return LEGEND.findall(svg)


def test_one_judge_legend_shows_the_dimension_labels(staff_client, catalog):
    agent = Agent.objects.filter(kind=Agent.Kind.CHARACTER).first()
    drift_runs(agent, ("offline/offline-rules-v1",))
    assert legend(staff_client, agent) == ["Adherence", "Consistency"]


def test_two_judges_legend_labels_the_dimension_and_keeps_the_judge(staff_client, catalog):
    agent = Agent.objects.filter(kind=Agent.Kind.CHARACTER).first()
    drift_runs(agent, ("offline/offline-rules-v1", "openai/gpt-5-mini"))
    assert legend(staff_client, agent) == [
        "Adherence · offline/offline-rules-v1",
        "Adherence · openai/gpt-5-mini",
        "Consistency · offline/offline-rules-v1",
        "Consistency · openai/gpt-5-mini",
    ]
