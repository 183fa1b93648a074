"""The session protocol answers only callers with a credential: a protocol key or a staff API token
to create a session, the session's own token to read it back or talk over its WebSocket."""

import asyncio
import json
import uuid

import pytest
import websockets
from rest_framework.authtoken.models import Token

from evaluation.models import TutoringSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def key(settings):
    return settings.EVALUATION["PROTOCOL_KEY"]


def create(client, **headers):
    return client.post("/sessions", {"topic_id": "comparing-decimals"}, content_type="application/json", **headers)


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", "Token not-a-token", "Basic eDp5"])
def test_creating_a_session_without_a_valid_credential_is_401(client, catalog, authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = create(client, **headers)
    assert response.status_code == 401 and "Authorization" in response.json()["error"]
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not TutoringSession.objects.exists()


def test_a_non_staff_api_token_cannot_create_sessions(client, catalog, django_user_model):
    user = django_user_model.objects.create_user("student", password="pw-student-123")
    response = create(client, HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    assert response.status_code == 403 and not TutoringSession.objects.exists()


def test_the_protocol_key_or_a_staff_token_creates_a_session_with_its_token(client, catalog, key, staff_user):
    for authorization in (f"Bearer {key}", f"Token {Token.objects.create(user=staff_user).key}"):
        response = create(client, HTTP_AUTHORIZATION=authorization)
        assert response.status_code == 201, response.content
        created = response.json()
        assert created["session_id"] and len(created["session_token"]) >= 32
    assert TutoringSession.objects.count() == 2


def test_reading_a_session_needs_its_own_token(client, catalog, key):
    first = create(client, HTTP_AUTHORIZATION=f"Bearer {key}").json()
    second = create(client, HTTP_AUTHORIZATION=f"Bearer {key}").json()
    url = f"/sessions/{first['session_id']}"
    assert client.get(url).status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {second['session_token']}").status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401  # the key creates, only
    response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {first['session_token']}")
    assert response.status_code == 200 and response.json()["session_id"] == first["session_id"]
    assert "session_token" not in response.json()


def test_an_unknown_session_with_a_token_of_another_is_401_not_404(client, catalog, key):
    token = create(client, HTTP_AUTHORIZATION=f"Bearer {key}").json()["session_token"]
    response = client.get(f"/sessions/{uuid.uuid4()}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401


# -- the WebSocket, against uvicorn ---------------------------------------------------------------


def created_on(server, key):
    import urllib.request

    request = urllib.request.Request(
        f"{server}/sessions",
        data=json.dumps({"topic_id": "comparing-decimals"}).encode(),
        method="POST",
        headers={"content-type": "application/json", "authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def first_frames(url, headers=None):
    async def talk():
        frames = []
        async with websockets.connect(url, additional_headers=headers or {}) as ws:
            try:
                while True:
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
                    if frames[-1]["type"] == "assistant":
                        return frames, None
            except websockets.ConnectionClosed as closed:
                return frames, closed.rcvd.code if closed.rcvd else None

    return asyncio.run(talk())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("token", [None, "wrong", "other"])
def test_a_socket_without_its_session_token_is_closed_4401_before_the_tutor_speaks(server, key, token):
    created = created_on(server, key)
    if token == "other":
        token = created_on(server, key)["session_token"]
    url = server.replace("http", "ws") + f"/sessions/ws/{created['session_id']}"
    frames, code = first_frames(url + (f"?token={token}" if token else ""))
    assert code == 4401 and [f["type"] for f in frames] == ["error"] and "token" in frames[0]["message"]
    session = TutoringSession.objects.get(pk=created["session_id"])
    assert session.full_conversation_log == []  # no tutor turn, so no LLM call


@pytest.mark.django_db(transaction=True)
def test_a_socket_with_its_session_token_talks(server, key):
    created = created_on(server, key)
    url = server.replace("http", "ws") + f"/sessions/ws/{created['session_id']}"
    frames, _ = first_frames(f"{url}?token={created['session_token']}")
    assert [f["type"] for f in frames] == ["state_update", "typing", "assistant"]
    created = created_on(server, key)
    url = server.replace("http", "ws") + f"/sessions/ws/{created['session_id']}"
    frames, _ = first_frames(url, {"Authorization": f"Bearer {created['session_token']}"})
    assert frames[-1]["type"] == "assistant"


def test_the_protocol_needs_no_csrf_token_and_takes_no_cookie_as_a_credential(catalog, key, staff_user):
    """A machine protocol: with Django's CSRF checks enforced, a caller with the key creates a session
    without a CSRF token; a staff browser's session cookie alone creates nothing, so a page on another
    site cannot make a logged-in staff member's browser start sessions (nothing for CSRF to guard)."""
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff_user)
    assert create(browser).status_code == 401
    assert not TutoringSession.objects.exists()
    response = create(browser, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 201, response.content
    session = response.json()
    read = browser.get(f"/sessions/{session['session_id']}", HTTP_AUTHORIZATION=f"Bearer {session['session_token']}")
    assert read.status_code == 200
