"""Progress events reach live views through a real Redis channel layer, in order, over one
connection that lives as long as the worker (not a new loop and connection per event); a run's
progress within a stage is paced (its newest event at most once a PACE), its status and stage
changes are not."""

import asyncio
import shutil
import time

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from evaluation.models import EvaluationRun
from evaluation.runs import broadcast as events
from tests.servers import redis_server

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed (.ci/run installs it)"
)


@pytest.fixture
def live_view(tmp_path, settings):
    """A Redis channel layer and a channel in the runs group, as a live view joins it; yields
    (receive(n): the details of the next n events, Redis client)."""
    with redis_server(tmp_path) as url:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}
        }
        layer = get_channel_layer()

        async def subscribe() -> str:
            name = await layer.new_channel()
            await layer.group_add(events.GROUP, name)
            return name

        channel = async_to_sync(subscribe)()

        def receive(n: int) -> list[str]:
            async def receive_all() -> list[str]:
                return [(await layer.receive(channel))["payload"]["detail"] for _ in range(n)]

            async def within_ten_seconds() -> list[str]:
                return await asyncio.wait_for(receive_all(), 10)

            return async_to_sync(within_ten_seconds)()

        yield receive, redis.Redis.from_url(url)


@pytest.mark.django_db
def test_a_burst_of_turns_sends_the_first_and_the_newest_over_one_connection(
    live_view, django_capture_on_commit_callbacks
):
    receive, server = live_view
    connections_before = server.info("stats")["total_connections_received"]
    run = EvaluationRun.objects.create(run_id="run_live", status="running", stage="running_session")
    with django_capture_on_commit_callbacks(execute=True):
        for turn in range(1, 31):
            run.detail = f"Turn {turn}/30"
            events.broadcast(run)
    assert events.flush(10), "the events were not sent within 10 s"
    opened = server.info("stats")["total_connections_received"] - connections_before
    assert receive(2) == ["Turn 1/30", "Turn 30/30"]
    assert opened <= 1, f"the events opened {opened} connections to Redis"


@pytest.mark.django_db
def test_a_held_turn_leaves_on_its_own_and_a_stage_change_is_never_held(live_view, django_capture_on_commit_callbacks):
    receive, _ = live_view
    run = EvaluationRun.objects.create(run_id="run_paced", status="running", stage="running_session")
    with django_capture_on_commit_callbacks(execute=True):
        for detail in ("Turn 1/9", "Turn 2/9"):  # the second is held: within PACE of the first
            run.detail = detail
            events.broadcast(run)
    time.sleep(events.PACE + 0.5)  # no flush: the held turn leaves when its pace allows
    with django_capture_on_commit_callbacks(execute=True):
        run.detail = "Turn 3/9"
        events.broadcast(run)  # within PACE of turn 2: held
        run.stage, run.detail = "evaluating", "Judging the conversation"
        events.broadcast(run)  # a new stage: at once, after the newest turn of the stage before
        run.status, run.stage, run.detail = "completed", "completed", "Complete"
        events.broadcast(run)  # had "Judging" been held, this newer event would have superseded it
    assert events.flush(5)
    # Had turn 2 still been held at turn 3 (more than PACE after turn 1), turn 3 would have replaced it.
    assert receive(5) == ["Turn 1/9", "Turn 2/9", "Turn 3/9", "Judging the conversation", "Complete"]


@pytest.mark.django_db
def test_a_stopped_run_drops_what_it_holds(live_view, django_capture_on_commit_callbacks):
    receive, _ = live_view
    run = EvaluationRun.objects.create(run_id="run_stopped", status="running", stage="running_session")
    with django_capture_on_commit_callbacks(execute=True):
        for detail in ("Turn 1/9", "Turn 2/9"):
            run.detail = detail
            events.broadcast(run)
    events.discard(run)  # as RunHandle.progress does when the run was cancelled meanwhile
    with django_capture_on_commit_callbacks(execute=True):
        run.status, run.detail = "cancelled", "Cancelled"
        events.broadcast(run)  # held turn 2 would have gone out first, after the cancellation was decided
    assert events.flush(5)
    assert receive(2) == ["Turn 1/9", "Cancelled"]
