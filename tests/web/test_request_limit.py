"""A web process works on at most EVAL_WEB_CONCURRENCY HTTP requests at once; the rest wait their turn
in the event loop, and a request gives its place up as soon as its response starts."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator

from evaluation.web.concurrency import RequestLimit


class CountingApp:
    """An ASGI app that answers after a pause and counts how many requests it serves at once."""

    def __init__(self, pause: float = 0.02):
        self.pause = pause
        self.now = 0
        self.most = 0
        self.served = 0

    async def __call__(self, scope, receive, send):
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(self.pause)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            self.served += 1
        finally:
            self.now -= 1


def get(app, path: str = "/"):
    return HttpCommunicator(app, "GET", path, headers=[(b"host", b"localhost")]).get_response(timeout=5)


def test_at_most_the_limit_are_served_at_once_and_every_request_is_answered():
    inner = CountingApp()
    app = RequestLimit(inner, 2)

    async def burst():
        return await asyncio.gather(*(get(app) for _ in range(20)))

    responses = async_to_sync(burst)()
    assert [r["status"] for r in responses] == [200] * 20
    assert inner.served == 20
    assert inner.most == 2


def test_a_limit_of_0_lets_every_request_in():
    inner = CountingApp()

    async def burst():
        return await asyncio.gather(*(get(RequestLimit(inner, 0)) for _ in range(10)))

    async_to_sync(burst)()
    assert inner.most == 10


def test_a_streamed_response_gives_its_place_up_once_it_has_started():
    release = asyncio.Event()

    async def streaming(scope, receive, send):
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await release.wait()  # the body goes on long after the response started
            await send({"type": "http.response.body", "body": b"done"})
        else:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"quick"})

    app = RequestLimit(streaming, 1)

    async def scenario():
        stream = asyncio.ensure_future(get(app, "/stream"))
        await asyncio.sleep(0.05)
        quick = await asyncio.wait_for(get(app, "/quick"), 2)  # not stuck behind the stream
        release.set()
        return quick, await stream

    quick, stream = async_to_sync(scenario)()
    assert quick["body"] == b"quick" and stream["body"] == b"done"


def test_a_request_that_fails_gives_its_place_back():
    async def failing(scope, receive, send):
        raise RuntimeError("view crashed")

    app = RequestLimit(failing, 1)

    async def twice():
        for _ in range(2):
            with pytest.raises(RuntimeError):
                await asyncio.wait_for(app({"type": "http", "path": "/"}, None, None), 2)

    async_to_sync(twice)()  # the second would wait for ever if the first had kept its place


def test_the_project_application_answers_a_burst_beyond_the_limit(settings):
    """Through the project's own ASGI application (the limit wired in front of Django). A page that
    does not exist touches no database, so the burst does not depend on the test's connections."""
    from evalproject.asgi import application

    assert settings.EVALUATION["WEB_CONCURRENCY"] >= 1

    async def burst():
        return await asyncio.gather(*(get(application, "/no/such/page") for _ in range(12)))

    assert [r["status"] for r in async_to_sync(burst)()] == [404] * 12


def test_a_view_that_waits_on_an_llm_is_not_held_up_by_the_limit_nor_holds_it():
    from django.urls import reverse

    from evaluation.web.concurrency import waits_on_an_llm

    gate = reverse("api-drift-gate", args=["some-agent"])
    assert waits_on_an_llm({"type": "http", "path": gate})
    assert waits_on_an_llm({"type": "http", "path": "/eval" + gate, "root_path": "/eval"})
    assert not waits_on_an_llm({"type": "http", "path": reverse("api-evaluation-runs")})
    assert not waits_on_an_llm({"type": "http", "path": "/no/such/page"})

    inner = CountingApp(pause=0.05)
    app = RequestLimit(inner, 1)

    async def burst():
        return await asyncio.gather(*(get(app, gate) for _ in range(6)))

    async_to_sync(burst)()
    assert inner.most == 6  # six gate checks at once, none waiting for the one place
