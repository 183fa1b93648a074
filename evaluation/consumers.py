"""Channels consumers (thin): the reference tutor's session socket."""

from channels.generic.websocket import AsyncJsonWebsocketConsumer


class TutorSessionConsumer(AsyncJsonWebsocketConsumer):
    pass
