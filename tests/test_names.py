"""Names for people: one label function for dimensions, root causes and personas, used by the pages and the
admin; the admin's lists and change pages summarise JSON instead of showing it raw."""

import json
import re

import pytest
from django.template import Context, Template
from django.utils import timezone

from evaluation.models import (
    Agent,
    CaseResult,
    DriftRun,
    EvaluationRun,
    Persona,
    Problem,
    Suite,
    SuiteRun,
    Topic,
)
from evaluation.models.runs import RootCause
from evaluation.templatetags.evaluation_extras import label
from evaluation.tutoring.rubric import RUBRIC

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("explanation_quality", "Explanation quality"),
        ("missed_student_signal", "Missed student signal"),
        ("emotional_attunement", "Emotional attunement"),
        ("pacing", "Pacing"),
        ("model_capability", "Model capability"),
        ("session-summary-lossy", "Session summary lossy"),
        ("llm_judge", "LLM judge"),
        ("", "–"),
        (None, "–"),
    ],
)
def test_label_turns_ids_into_words(value, expected):
    assert label(value) == expected


def test_every_dimension_and_root_cause_has_a_label_without_underscores():
    for name in [d.name for d in RUBRIC] + [c.value for c in RootCause]:
        text = label(name)
        assert "_" not in text and text[0].isupper(), (name, text)


def test_a_persona_or_topic_is_labelled_by_its_name(catalog):
    persona = Persona.objects.get(persona_id="simplicity_seeker")
    topic = Topic.objects.get(topic_id="comparing-decimals")
    assert label(persona) == persona.name and "_" not in label(persona)
    assert label(topic) == topic.name


def test_a_rubric_dimension_is_labelled_by_its_words_not_its_id():
    assert [label(d) for d in RUBRIC][:2] == ["Responsiveness", "Explanation quality"]


def test_the_template_filter_is_the_same_function():
    html = Template("{% load evaluation_extras %}{{ d|label }} / {{ c|label }}").render(
        Context({"d": "explanation_quality", "c": "missed_student_signal"})
    )
    assert html == "Explanation quality / Missed student signal"


def tutor_run(**fields) -> EvaluationRun:
    return EvaluationRun.objects.create(
        run_id="run_names_1",
        persona=Persona.objects.get(persona_id="simplicity_seeker"),
        topic=Topic.objects.get(topic_id="comparing-decimals"),
        status="completed",
        stage="completed",
        overall_score=6.0,
        config={"persona": "simplicity_seeker", "server_url": "http://user:s3cret@tutor.example/", "max_turns": 6},
        token_usage={"calls": 9, "input_tokens": 11567, "output_tokens": 300, "by_provider": {"offline": 9}},
        **fields,
    )


def test_the_run_change_page_summarises_config_and_usage_and_masks_credentials(staff_client, catalog):
    run = tutor_run()
    Problem.objects.create(
        run=run, rank=1, title="rushes", turns=[1], quote="q", severity="major", root_cause="missed_student_signal"
    )
    html = staff_client.get(f"/admin/evaluation/evaluationrun/{run.pk}/change/").content.decode()
    assert "s3cret" not in html  # the URL's password is masked in the summary and in the raw JSON
    assert "9 calls · 11,567 input tokens · 300 output tokens" in html
    assert "<dt>Server URL</dt>" in html and "<dt>Max turns</dt>" in html
    assert re.search(r'<fieldset class="[^"]*collapse', html)  # the raw values start folded
    assert "Missed student signal" in html and f"{Persona.objects.get(persona_id='simplicity_seeker').name} · " in html


def test_the_runs_list_names_runs_and_has_few_columns(staff_client, catalog):
    run = tutor_run()
    html = staff_client.get("/admin/evaluation/evaluationrun/").content.decode()
    head = re.search(r"<thead>(.*?)</thead>", html, re.S)
    assert head is not None
    assert len(re.findall(r"<th ", head.group(1))) <= 7  # the action checkbox and six columns
    assert f"{run.persona.name} · {run.topic.name}" in html


def test_the_drift_runs_list_shows_words_not_json(staff_client):
    agent = Agent.objects.create(id="ace_cast", display_name="Ace of the cast", kind="character")
    run = EvaluationRun.objects.create(run_id="drift_names", kind="drift", source="drift", agent=agent)
    DriftRun.objects.create(
        run=run,
        dimensions=["adherence", "voice_consistency"],
        judged_by={"adherence": "offline", "voice_consistency": "offline"},
    )
    html = staff_client.get("/admin/evaluation/driftrun/").content.decode()
    assert "Adherence, Voice consistency" in html and "Ace of the cast" in html
    assert "[&quot;adherence&quot;" not in html and "{&quot;adherence&quot;" not in html


def test_the_suite_runs_list_has_status_and_result(staff_client):
    suite = Suite.objects.create(name="greeter", path="skills/greeter")
    case = suite.cases.create(name="says hello", prompt="hi", expect="greets")
    other = suite.cases.create(name="says bye", prompt="bye", expect="waves", line=2)
    run = EvaluationRun.objects.create(run_id="suite_names", kind="suite", source="suite", status="completed")
    SuiteRun.objects.create(run=run, suite=suite, suite_path="skills/greeter")
    CaseResult.objects.create(run=run, case=case, passed=True)
    CaseResult.objects.create(run=run, case=other, passed=False)
    html = staff_client.get("/admin/evaluation/suiterun/").content.decode()
    assert "column-status" in html and "column-result" in html
    assert "Completed" in html and "1 passed, 1 failed" in html


def test_topic_objectives_are_edited_one_per_line_and_round_trip(staff_client, catalog):
    topic = Topic.objects.get(topic_id="comparing-decimals")
    url = f"/admin/evaluation/topic/{topic.pk}/change/"
    html = staff_client.get(url).content.decode()
    field = re.search(r'<textarea[^>]*name="learning_objectives"[^>]*>(.*?)</textarea>', html, re.S)
    assert field is not None
    shown = field.group(1).strip().splitlines()
    assert shown == list(topic.learning_objectives) and not field.group(1).lstrip().startswith("[")
    form = {
        "topic_id": topic.topic_id,
        "name": topic.name,
        "grade": topic.grade,
        "subject": topic.subject,
        "description": topic.description,
        "learning_objectives": "Compare tenths\n\n  Order decimals  \n",
        "common_misconceptions": "Longer is bigger",
        "approved": "on" if topic.approved else "",
        "extra": json.dumps(topic.extra or {}),
    }
    response = staff_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    topic.refresh_from_db()
    assert topic.learning_objectives == ["Compare tenths", "Order decimals"]
    assert topic.common_misconceptions == ["Longer is bigger"]


def test_dimension_and_cause_labels_on_the_run_page(staff_client, catalog):
    from evaluation.models import DimensionScore

    run = tutor_run()
    run.completed_at = timezone.now()
    run.save()
    DimensionScore.objects.create(run=run, dimension="explanation_quality", score=6, analysis="fine")
    Problem.objects.create(
        run=run, rank=1, title="rushes", turns=[1], quote="q", severity="major", root_cause="missed_student_signal"
    )
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    text = re.sub(r"<[^>]+>", " ", html)  # what people read: attributes keep the ids
    assert "Missed student signal" in text and "missed_student_signal" not in text
