"""Channels consumer for live run progress on the staff dashboard (needs a shared channel layer)."""

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from evaluation.runs.broadcast import GROUP


@database_sync_to_async
def _can_view_runs(user: Any) -> bool:
    return bool(user.has_perm("evaluation.view_evaluationrun"))


class RunProgressConsumer(AsyncJsonWebsocketConsumer):
    """Live run progress for staff dashboards (needs a shared channel layer such as Redis)."""

    groups = [GROUP]

    async def connect(self) -> None:
        user = self.scope.get("user")
        if not (user and user.is_authenticated and user.is_staff and await _can_view_runs(user)):
            await self.close(code=4403)
            return
        await self.accept()

    async def run_progress(self, event: dict[str, Any]) -> None:
        await self.send_json(event["payload"])
