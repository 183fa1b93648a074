"""Credentials of the session protocol: who may create a session, and each session's own token.

Creating a session costs LLM calls, so it needs `Authorization: Bearer <EVALUATION['PROTOCOL_KEY']>`
(the app's own runner, machine to machine) or `Authorization: Token <API token>` of a staff user who
holds the permission to start runs (`evaluation.start_run`, as the API's start). Each session then has
its own token, returned once at creation, for reading it back and for its WebSocket. The token is an
HMAC of the session id under SECRET_KEY: nothing secret is stored, and every process of the install
checks it alike.
"""

import hmac
from typing import Any
from urllib.parse import parse_qs

from django.utils.crypto import salted_hmac
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from evaluation.api.permissions import NOT_STAFF, may
from evaluation.conf import setting

SESSION_TOKEN_PURPOSE = "evaluation.protocol.session-token"
CREATE_REFUSED = (
    "Authorization: creating a session needs 'Bearer <protocol key>' (EVAL_PROTOCOL_KEY) "
    "or 'Token <the API token of a staff user who may start runs>'"
)
CREATE_PERMISSION = "evaluation.start_run"
CREATE_FORBIDDEN = f"Authorization: creating a session needs the permission {CREATE_PERMISSION!r}"
READ_REFUSED = "Authorization: this session needs 'Bearer <session_token>', the token its creation returned"
SOCKET_REFUSED = "token: this session needs its session_token (?token=... or 'Authorization: Bearer ...')"


def session_token(session_id: Any) -> str:
    return salted_hmac(SESSION_TOKEN_PURPOSE, str(session_id), algorithm="sha256").hexdigest()


def session_token_ok(session_id: Any, presented: str) -> bool:
    return bool(presented) and hmac.compare_digest(session_token(session_id).encode(), presented.encode())


def bearer(authorization: str) -> str:
    """The credential of an `Authorization: Bearer <credential>` header, or ""."""
    scheme, _, value = authorization.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def create_refusal(authorization: str) -> tuple[int, str] | None:
    """Why a session may not be created with this Authorization header, as (HTTP status, message); None if it may.

    401 when no credential is recognised; 403 when a known user's token lacks staff or the permission.
    """
    scheme, _, value = authorization.strip().partition(" ")
    value = value.strip()
    if not value:
        return 401, CREATE_REFUSED
    if scheme.lower() == "bearer":
        if hmac.compare_digest(value.encode(), str(setting("PROTOCOL_KEY")).encode()):
            return None
        return 401, CREATE_REFUSED
    if scheme.lower() == "token":
        try:
            user, _ = TokenAuthentication().authenticate_credentials(value)
        except AuthenticationFailed:
            return 401, CREATE_REFUSED
        if not user.is_staff:
            return 403, f"{CREATE_FORBIDDEN}; {NOT_STAFF}"
        if not may(user, CREATE_PERMISSION):
            return 403, CREATE_FORBIDDEN
        return None
    return 401, CREATE_REFUSED


def may_create(authorization: str) -> bool:
    return create_refusal(authorization) is None


def socket_credential(scope: dict[str, Any]) -> str:
    """The token a WebSocket handshake carries: ?token=, else an Authorization: Bearer header."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0]
    headers = dict(scope.get("headers") or [])
    return bearer(headers.get(b"authorization", b"").decode("latin-1"))
