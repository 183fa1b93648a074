"""API fixtures: a token client for a staff user, runs in every state, and the reference tutor (for full runs)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from evaluation.models import Agent, DimensionScore, EvaluationRun, Persona, Problem, Topic


@pytest.fixture
def token(staff_user):
    return Token.objects.create(user=staff_user)


@pytest.fixture
def api(token):
    """A client that authenticates as an integration would: `Authorization: Token <key>`."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def anonymous():
    return APIClient()


def make_run(run_id, *, kind="tutor", status="completed", scores=None, problems=(), **fields):
    """A stored run as a finished (or queued, failed, ...) evaluation leaves it."""
    stage = {"queued": "queued", "running": "running_session"}.get(status, status)
    run = EvaluationRun.objects.create(run_id=run_id, kind=kind, status=status, stage=stage, **fields)
    for dimension, score in (scores or {}).items():
        DimensionScore.objects.create(run=run, dimension=dimension, score=score, analysis=f"about {dimension}")
    if scores:
        run.overall_score = round(sum(scores.values()) / len(scores), 2)
        run.save(update_fields=["overall_score"])
    for rank, (title, severity, root_cause) in enumerate(problems, start=1):
        Problem.objects.create(
            run=run, rank=rank, title=title, severity=severity, root_cause=root_cause, turns=[rank], quote="q"
        )
    return run


@pytest.fixture
def runs(catalog):
    """Three tutor runs (two personas, two statuses, two days) and a drift run."""
    ace, struggler = Persona.objects.get(persona_id="ace"), Persona.objects.get(persona_id="struggler")
    topic = Topic.objects.get(topic_id="comparing-decimals")
    made = {
        "ace": make_run(
            "run_ace",
            persona=ace,
            topic=topic,
            scores={"responsiveness": 8, "pacing": 6},
            problems=[("Ignores the doubt", "critical", "missed_student_signal"), ("=1+1", "minor", "other")],
        ),
        "struggler": make_run("run_struggler", status="failed", persona=struggler, topic=topic, error="judge broke"),
        "old": make_run("run_old", persona=ace, topic=topic, scores={"responsiveness": 3, "pacing": 4}),
        "drift": make_run(
            "drift_rex", kind="drift", agent=Agent.objects.get(pk="rex"), scores={"adherence": 7, "fluency": 5}
        ),
    }
    EvaluationRun.objects.filter(pk=made["old"].pk).update(created_at=timezone.now() - timedelta(days=10))
    return made
