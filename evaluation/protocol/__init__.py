"""The reference tutor's session protocol (docs/session-protocol.md), a door: its HTTP half and its WebSocket half."""
