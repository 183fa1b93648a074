"""What the loopback server refuses as the vendors do: a request body checked against the installed SDK's
request type (sdk_types) and the vendors' documented limits the type cannot say, and the vendor's 400 for it.
Used by the single endpoints (loopback) and the batch APIs (loopback_batch) alike."""

import itertools
import json
from typing import Any

from evaluation.providers import sdk_types
from evaluation.providers.capabilities import terms_for

CACHE_TTLS = {"5m": 300.0, "1h": 3600.0}
"""Anthropic's cache lifetimes a breakpoint may ask for."""
MAX_BREAKPOINTS = 4
"""Anthropic's limit of cache_control blocks in one request."""


def _without_cache_control(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


def _ttl(block: Any) -> str | None:
    """The cache lifetime a block's breakpoint asks for ("5m" by default), or None: no breakpoint."""
    if not isinstance(block, dict) or not block.get("cache_control"):
        return None
    return str(block["cache_control"].get("ttl") or "5m")


def anthropic_segments(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The prompt in Anthropic's cache order (tools, system, messages) as (text, the lifetime of the
    breakpoint it ends at, or None)."""
    segments: list[tuple[str, str | None]] = []
    for tool in body.get("tools") or []:
        segments.append((json.dumps(_without_cache_control(tool)), _ttl(tool)))
    # A string is the same prompt as one text block holding it: both hash alike.
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    segments += [(json.dumps(_without_cache_control(b)), _ttl(b)) for b in system]
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or []:
            segments.append((json.dumps([message.get("role"), _without_cache_control(block)]), _ttl(block)))
    return segments


def request_problem(endpoint: str, body: dict[str, Any]) -> str | sdk_types.TypeProblem | None:
    """Why the vendor would refuse this request body with a 400 (None when it would take it): the installed
    SDK's request type first, then the documented limits the type cannot say."""
    problem = sdk_types.check(body, sdk_types.request_type(endpoint))
    if problem is not None:
        return problem
    if endpoint == "messages":
        marked = sum(1 for _, ttl in anthropic_segments(body) if ttl is not None)
        if marked > MAX_BREAKPOINTS:
            return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marked}."
        thinking = body.get("thinking") or {}
        if thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens", 0)
            if budget < 1024:
                return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            if budget >= body.get("max_tokens", 0):
                return "`max_tokens` must be greater than `thinking.budget_tokens`"
        ttls = [ttl for _, ttl in anthropic_segments(body) if ttl is not None]
        if any(CACHE_TTLS[a] < CACHE_TTLS[b] for a, b in itertools.pairwise(ttls)):
            return "a cache_control block with ttl='1h' cannot come after one with ttl='5m'"
    if endpoint == "responses" and body.get("reasoning") and body.get("temperature") is not None:
        if not terms_for("openai", str(body.get("model", "")), api="responses").temperature_with_reasoning:
            return "Unsupported parameter: 'temperature' is not supported with this model."
    return None


def invalid_request(endpoint: str, problem: "str | sdk_types.TypeProblem") -> tuple[int, dict[str, Any]]:
    """The vendor's 400 for an invalid request: Anthropic's {"type": "error", "error": {...}} or OpenAI's
    {"error": {message, type, param, code}}."""
    if endpoint in ("messages", "messages_batch"):
        message = problem if isinstance(problem, str) else sdk_types.anthropic_error(problem)
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if isinstance(problem, str):
        param = "temperature" if "'temperature'" in problem else None
        message, code = problem, "unsupported_parameter" if param else "invalid_request"
    else:
        message, param, code = sdk_types.openai_error(problem)
    return 400, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
