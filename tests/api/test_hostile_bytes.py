"""Hostile bytes at every JSON door: over-long numbers and lone surrogates get a 4xx naming the field,
never a 500, and nothing is stored."""

import json

import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token

from evaluation.models import AgentMessage, Transcript, TutoringSession

pytestmark = pytest.mark.django_db

LONG = "7" * 5000
SURROGATE = '"\\udfff"'


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("op", password="x" * 16, is_staff=True)
    user.groups.add(Group.objects.get(name="operator"))
    return user


@pytest.fixture
def auth(operator):
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=operator).key}"}


@pytest.fixture
def key(settings):
    return {"HTTP_AUTHORIZATION": f"Bearer {settings.EVALUATION['PROTOCOL_KEY']}"}


def refused(response, *words):
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    text = response.content.decode()
    for word in words:
        assert word in text, text[:500]
    return response.json()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (f'{{"topic_id": "comparing-decimals", "seed": {LONG}}}', "seed"),
        (f'{{"topic_id": {SURROGATE}}}', "topic_id"),
        (f'{{"topic_id": "comparing-decimals", "user": {SURROGATE}}}', "user"),
        (f'{{"topic_id": "comparing-decimals", "extra": [{SURROGATE}]}}', "extra"),
    ],
)
def test_sessions_refuse_long_numbers_and_surrogates(client, catalog, key, body, field):
    response = client.post("/sessions", body, content_type="application/json", **key)
    refused(response, field)
    assert not TutoringSession.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (f'[{{"agent": "a", "channel": "c", "text": "t", "time": {LONG}}}]', "[0].time"),
        (f'{{"agent": "a", "channel": "c", "text": {SURROGATE}}}', "text"),
        (f'{{"agent": "a", "channel": "c", "text": "t"}}\n{{"agent": {LONG}}}', "line 2"),
    ],
)
def test_drift_ingest_refuses_long_numbers_and_surrogates(client, catalog, auth, body, field):
    response = client.post("/api/drift/messages", body, content_type="application/json", **auth)
    refused(response, field)
    assert not AgentMessage.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        f'[{{"id": "t", "messages": [{{"role": "tutor", "content": "x"}}], "labels": {{"pacing": {LONG}}}}}]',
        f'[{{"id": "t", "messages": [{{"role": "tutor", "content": {SURROGATE}}}]}}]',
    ],
)
def test_judging_import_refuses_long_numbers_and_surrogates(client, auth, body):
    response = client.post("/api/judging/import?input_format=json", body, content_type="application/json", **auth)
    refused(response, "record 0")
    assert not Transcript.objects.exists()


def test_text_transcript_with_a_long_annotator_is_refused(client, auth):
    body = "# annotator: " + "a" * 200 + "\nTutor: hi\nStudent: hello\n"
    response = client.post("/api/judging/import?input_format=text", body, content_type="text/plain", **auth)
    refused(response, "annotator", "150")
    assert not Transcript.objects.exists()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/drift/agents/{agent}/gate", f'{{"text": "t", "channel": "c", "attempt": {LONG}}}'),
        ("/api/drift/agents/{agent}/gate", f'{{"text": {SURROGATE}, "channel": "c"}}'),
        ("/api/drift/agents/{agent}/pre-invocation", f'{{"channel": {SURROGATE}}}'),
    ],
)
def test_drf_bodies_refuse_long_numbers_and_surrogates(client, catalog, auth, path, body):
    from evaluation.models import Agent

    agent = Agent.objects.first()
    response = client.post(path.format(agent=agent.pk if agent else "x"), body, content_type="application/json", **auth)
    refused(response)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/drift/agents/{agent}/gate", {"text": "t", "channel": "c", "original_text": 0}, "original_text"),
        ("/api/drift/agents/{agent}/pre-invocation", {"channel": 0}, "channel"),
        ("/api/drift/agents/{agent}/evaluate", {"dimensions": [1]}, "dimensions.0"),
        ("/api/evaluation/start", {"topic_id": 5}, "topic_id"),
        ("/api/evaluation/start", {"topic_id": "comparing-decimals", "baseline": "b" * 201}, "baseline"),
    ],
)
def test_a_string_field_takes_only_a_string_of_its_column_width(client, catalog, auth, path, body, field):
    from evaluation.models import Agent, EvaluationRun

    agent = Agent.objects.first()
    response = client.post(path.format(agent=agent.pk), json.dumps(body), content_type="application/json", **auth)
    assert field in refused(response)["fields"]
    assert not EvaluationRun.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        (f'{{"topic_id": "comparing-decimals", "seed": {LONG}}}', "seed", "5000 digits"),
        ('{"topic_id": "comparing-decimals", "seed": NaN}', "seed", "finite"),
        ('{"topic_id": "comparing-decimals", "cost_limit_usd": 1e999}', "cost_limit_usd", "finite"),
        (f'{{"topic_id": {SURROGATE}}}', "topic_id", "lone surrogate"),
    ],
)
def test_drf_bodies_name_the_field_of_a_number_or_string_no_column_holds(client, catalog, auth, body, field, reason):
    from evaluation.models import EvaluationRun

    response = client.post("/api/evaluation/start", body, content_type="application/json", **auth)
    assert reason in refused(response, field)["fields"][field][0]
    assert not EvaluationRun.objects.exists()


def test_drift_ingest_refuses_a_channel_wider_than_its_column(client, catalog, auth):
    from evaluation.models import Agent

    agent = Agent.objects.first().pk
    records = [{"agent": agent, "channel": "#" + "c" * 101, "text": "t"}, {"agent": agent, "channel": "c", "text": "t"}]
    response = client.post("/api/drift/messages", json.dumps(records), content_type="application/json", **auth)
    assert "at most 100" in refused(response)["fields"]["[0].channel"][0]
    assert not AgentMessage.objects.exists()


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ('{"note": "\\udfff"}', "note: holds a lone surrogate"),
        ('{"n": ' + LONG + "}", "n: is a number of 5000 digits"),
        ('{"n": NaN}', "n: is NaN: numbers must be finite"),
    ],
)
def test_an_admin_json_field_names_what_no_column_holds(client, django_user_model, extra, reason):
    from evaluation.models import Agent

    client.force_login(django_user_model.objects.create_superuser("root", password="x" * 16))
    form = {"id": "agent-x", "display_name": "X", "kind": "reference", "extra": extra}
    form |= {f"evaluation_config-{k}": v for k, v in {"TOTAL_FORMS": 0, "INITIAL_FORMS": 0}.items()}
    response = client.post("/admin/evaluation/agent/add/", form)
    assert response.status_code == 200 and reason in response.content.decode()
    assert not Agent.objects.filter(pk="agent-x").exists()


def test_a_label_map_in_the_query_string_fits_a_request_line(client, auth):
    from urllib.parse import quote

    label_map = json.dumps({"*": {f"wording {i}": "4" for i in range(400)}})
    assert len(label_map) > 4000
    body = json.dumps([{"id": "t", "messages": [{"role": "tutor", "content": "x"}]}])
    response = client.post(
        f"/api/judging/import?map_labels={quote(label_map)}", body, content_type="application/json", **auth
    )
    assert "4000" in refused(response)["fields"]["map_labels"][0]
    assert not Transcript.objects.exists()
