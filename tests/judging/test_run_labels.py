"""Staff label a run on its report page: each as themselves, beside the run's own judge, counted in agreement."""

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from evaluation.judging import selectors
from evaluation.models import Annotation, DimensionScore, EvaluationRun, JudgeConfiguration, RunMessage

pytestmark = pytest.mark.django_db

SCORES = {"responsiveness": 7, "explanation_quality": 6, "emotional_attunement": 8, "pacing": 5, "authenticity": 6}


@pytest.fixture
def run():
    run = EvaluationRun.objects.create(
        run_id="run_label_me", status="completed", stage="completed", judge_label="offline/offline-rules-v1"
    )
    now = timezone.now()
    for turn, (role, text) in enumerate([("tutor", "What is 7 x 8?"), ("student", "54"), ("tutor", "Not quite.")], 1):
        RunMessage.objects.create(run=run, turn=turn, role=role, content=text, timestamp=now, attempt=1)
    RunMessage.objects.create(run=run, turn=1, role="tutor", content="older attempt", timestamp=now, attempt=0)
    for name, score in SCORES.items():
        DimensionScore.objects.create(run=run, dimension=name, score=score)
    return run


def staff(django_user_model, name, group):
    user = django_user_model.objects.create_user(name, password="x" * 16, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def test_two_staff_label_a_run_on_its_report_and_agreement_counts_them(client, run, django_user_model):
    for name, pacing in (("olga", "4"), ("omar", "6")):
        client.force_login(staff(django_user_model, name, "operator"))
        page = client.get("/admin/evaluation/runs/run_label_me/").content.decode()
        assert 'id="labels"' in page and 'name="label_pacing"' in page
        response = client.post(
            "/admin/evaluation/runs/run_label_me/labels",
            {"label_pacing": pacing, "label_authenticity": "7", "label_responsiveness": ""},
        )
        assert response.status_code == 302 and response["Location"].endswith("/runs/run_label_me/#labels")
    labels = sorted(Annotation.objects.values_list("annotator", "dimension__name", "value", "user__username"))
    assert labels == [
        ("olga", "authenticity", "7", "olga"),
        ("olga", "pacing", "4", "olga"),
        ("omar", "authenticity", "7", "omar"),
        ("omar", "pacing", "6", "omar"),
    ]
    page = client.get("/admin/evaluation/runs/run_label_me/").content.decode()
    assert '<option value="6" selected>6</option>' in page and "olga: 4" in page  # mine, and the others'
    item = Annotation.objects.first().item
    assert item.transcript.source == "run" and [m["content"] for m in item.transcript.messages] == [
        "What is 7 x 8?",
        "54",
        "Not quite.",
    ]
    configuration = JudgeConfiguration.objects.get()
    assert configuration.key == "offline/offline-rules-v1 | the runs' own judge | tutor-session v1"
    table = selectors.agreement_table(configuration)
    pacing = next(r for r in table.rows if r.dimension == "pacing")
    assert pacing.judge_vs_humans.exact.n == 1 and pacing.humans.n == 1


def test_a_bad_label_is_refused_and_a_viewer_cannot_label(client, run, django_user_model):
    client.force_login(staff(django_user_model, "olga", "operator"))
    response = client.post("/admin/evaluation/runs/run_label_me/labels", {"label_pacing": "11"}, follow=True)
    assert (
        "Labels not saved: pacing: &#x27;11&#x27; is not on the scale; allowed: an integer from 1 to 10"
        in response.content.decode()
    )
    assert not Annotation.objects.exists()
    response = client.post("/admin/evaluation/runs/run_label_me/labels", {"label_speed": "3"}, follow=True)
    assert "speed: rubric &#x27;tutor-session&#x27; has no such dimension" in response.content.decode()
    assert client.post("/admin/evaluation/runs/nope/labels", {"label_pacing": "3"}).status_code == 404
    client.force_login(staff(django_user_model, "vera", "viewer"))
    page = client.get("/admin/evaluation/runs/run_label_me/").content.decode()
    assert 'id="labels"' in page and 'name="label_pacing"' not in page
    assert client.post("/admin/evaluation/runs/run_label_me/labels", {"label_pacing": "3"}).status_code == 403
