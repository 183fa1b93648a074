"""Progress events reach live views through a real Redis channel layer, in order, over one
connection that lives as long as the worker (not a new loop and connection per event)."""

import shutil

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


@pytest.mark.django_db
def test_thirty_progress_events_arrive_in_order_over_one_connection(
    tmp_path, settings, django_capture_on_commit_callbacks
):
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
        server = redis.Redis.from_url(url)
        connections_before = server.info("stats")["total_connections_received"]
        run = EvaluationRun.objects.create(run_id="run_live", status="running")
        with django_capture_on_commit_callbacks(execute=True):
            for turn in range(1, 31):
                run.detail = f"Turn {turn}/30"
                events.broadcast(run)
        assert events.flush(10), "the events were not sent within 10 s"
        opened = server.info("stats")["total_connections_received"] - connections_before

        async def receive_all() -> list[str]:
            return [(await layer.receive(channel))["payload"]["detail"] for _ in range(30)]

        received = async_to_sync(receive_all)()
    assert received == [f"Turn {turn}/30" for turn in range(1, 31)]
    assert opened <= 1, f"30 events opened {opened} connections to Redis"
