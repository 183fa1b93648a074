"""Creating a tutoring session costs tutor turns: an API token creates one only for a staff user who may
start runs (evaluation.start_run, as the API's start); the protocol key stays the machine-to-machine way."""

import pytest
from django.contrib.auth.models import Group, Permission
from rest_framework.authtoken.models import Token

from evaluation.models import TutoringSession

pytestmark = pytest.mark.django_db


def create(client, authorization):
    return client.post(
        "/sessions",
        {"topic_id": "comparing-decimals"},
        content_type="application/json",
        HTTP_AUTHORIZATION=authorization,
    )


def token(user) -> str:
    return f"Token {Token.objects.create(user=user).key}"


@pytest.fixture
def users(django_user_model):
    staff = django_user_model.objects.create_user("staffer", password="x" * 16, is_staff=True)
    viewer = django_user_model.objects.create_user("viewer", password="x" * 16, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    operator = django_user_model.objects.create_user("operator", password="x" * 16, is_staff=True)
    operator.groups.add(Group.objects.get(name="operator"))
    starter = django_user_model.objects.create_user("starter", password="x" * 16, is_staff=True)
    starter.user_permissions.add(Permission.objects.get(codename="start_run"))
    outsider = django_user_model.objects.create_user("outsider", password="x" * 16)
    outsider.user_permissions.add(Permission.objects.get(codename="start_run"))
    return {"staff": staff, "viewer": viewer, "operator": operator, "starter": starter, "outsider": outsider}


@pytest.mark.parametrize("who", ["staff", "viewer"])
def test_a_staff_token_without_the_start_permission_is_403_naming_it(client, catalog, users, who):
    response = create(client, token(users[who]))
    assert response.status_code == 403, response.content
    assert "evaluation.start_run" in response.json()["error"]
    assert not response.has_header("WWW-Authenticate")
    assert not TutoringSession.objects.exists()


def test_a_token_of_a_user_who_is_not_staff_is_403_even_with_the_permission(client, catalog, users):
    response = create(client, token(users["outsider"]))
    assert response.status_code == 403
    assert "is_staff" in response.json()["error"] and "evaluation.start_run" in response.json()["error"]
    assert not TutoringSession.objects.exists()


@pytest.mark.parametrize("who", ["operator", "starter"])
def test_a_staff_token_with_the_start_permission_creates_a_session(client, catalog, users, who):
    response = create(client, token(users[who]))
    assert response.status_code == 201, response.content
    assert response.json()["session_token"]


def test_the_protocol_key_needs_no_user(client, catalog, settings):
    response = create(client, f"Bearer {settings.EVALUATION['PROTOCOL_KEY']}")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    ("faults", "reason"),
    [
        ("gives_answer_away", "faults: must be a list of at most 10 fault names"),
        ([1], "faults: must be a list of at most 10 fault names"),
        (["sleeps_in_class"], "faults: unknown sleeps_in_class (known: gives_answer_away, ignores_last_message)"),
    ],
)
def test_a_session_with_faults_the_tutor_does_not_know_is_refused_naming_the_field(
    client, catalog, settings, faults, reason
):
    response = client.post(
        "/sessions",
        {"topic_id": "comparing-decimals", "faults": faults},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {settings.EVALUATION['PROTOCOL_KEY']}",
    )
    assert response.status_code == 400 and reason in response.json()["error"], response.content
    assert "faults" in response.json()["fields"] and not TutoringSession.objects.exists()


def test_a_session_with_the_degraded_tutors_faults_keeps_them_in_its_state(client, catalog, settings):
    response = client.post(
        "/sessions",
        {"topic_id": "comparing-decimals", "faults": ["ignores_last_message", "gives_answer_away"]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {settings.EVALUATION['PROTOCOL_KEY']}",
    )
    assert response.status_code == 201, response.content
    assert TutoringSession.objects.get().state["faults"] == ["gives_answer_away", "ignores_last_message"]
