"""The ASGI application's WebSocket routes refuse pages from other origins (cross-site WebSocket
hijacking) and still serve machine clients, which send no Origin header."""

import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from evalproject.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def opens(path: str, origin: str | None = None, cookie: str | None = None) -> bool:
    headers = [(b"host", b"localhost:8000")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if cookie is not None:
        headers.append((b"cookie", cookie.encode()))

    async def attempt() -> bool:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    return async_to_sync(attempt)()


@pytest.fixture
def staff_cookie(client, staff_user):
    client.force_login(staff_user)
    return f"sessionid={client.cookies['sessionid'].value}"


def test_run_progress_socket_refuses_a_foreign_origin_even_with_a_staff_cookie(staff_cookie):
    assert not opens("/ws/runs/", origin="https://evil.example", cookie=staff_cookie)
    assert not opens("/ws/runs/", origin="null", cookie=staff_cookie)


def test_run_progress_socket_accepts_the_own_origin_with_a_staff_cookie(staff_cookie):
    assert opens("/ws/runs/", origin="http://localhost:8000", cookie=staff_cookie)
    assert not opens("/ws/runs/", origin="http://localhost:8000")  # and still needs the staff session


def test_session_socket_serves_a_client_without_origin_and_refuses_a_foreign_page():
    path = f"/sessions/ws/{uuid.uuid4()}"
    assert opens(path)  # the evaluation runner (websockets library) sends no Origin
    assert not opens(path, origin="https://evil.example")
