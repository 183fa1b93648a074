"""The provider interface: what a call takes, what it returns, and how it fails."""

import hashlib
import json
import random
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any, Literal, Protocol

from evaluation.errors import PlainMessage
from evaluation.roles import LLMRole

ROLES: tuple[str, ...] = tuple(LLMRole.values)
"""The roles an LLM plays; the admin's LLM configs offer the same list."""


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One chat message. An assistant message may carry tool calls; a "tool" message answers one."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class GenerateSettings:
    """Generation settings; every field here can change the output, so all of them are fingerprinted."""

    max_tokens: int = 1024
    temperature: float | None = None
    reasoning_effort: str | None = None
    """OpenAI reasoning models: "low" | "medium" | "high"."""
    thinking_budget: int | None = None
    """Anthropic extended thinking: token budget (None = off)."""
    seed: int | None = None


@dataclass(frozen=True)
class Usage:
    """Tokens one call (or a sum of calls) used."""

    input_tokens: int = 0
    """Every prompt token, cached or not (Anthropic's three input counts are summed into it)."""
    output_tokens: int = 0
    thinking_tokens: int = 0
    calls: int = 0
    cached_input_tokens: int = 0
    """Of input_tokens, those read from the vendor's prompt cache (billed at the cached-input price)."""
    cache_write_tokens: int = 0
    """Of input_tokens, those written to the prompt cache (Anthropic bills them above the input price; OpenAI
    reports them as input_tokens_details.cache_write_tokens)."""
    cache_write_long_tokens: int = 0
    """Of cache_write_tokens, those written for the long lifetime (Anthropic's 1-hour cache, billed at its
    own price)."""

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in USAGE_FIELDS})

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, stored: dict[str, Any] | None) -> "Usage":
        """Totals stored earlier (as_dict's shape, or an older one without the cache counts)."""
        stored = stored or {}
        return cls(**{name: int(stored.get(name) or 0) for name in USAGE_FIELDS})


USAGE_FIELDS: tuple[str, ...] = tuple(Usage.__dataclass_fields__)


@dataclass
class Request:
    """What a vendor is asked: messages (directive already placed), settings and an optional schema."""

    role: str
    model: str
    messages: list[Message]
    settings: GenerateSettings = field(default_factory=GenerateSettings)
    schema: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    """Functions offered to the model: [{"name", "description", "parameters" (JSON schema)}]."""
    directive: str | None = None
    """The turn directive, before placement (it is also placed in the messages)."""
    offline: "OfflineRule | None" = None
    """The rule-based answer the offline provider gives to this call; real vendors never read it."""
    timeout: float = 120.0

    def with_messages(self, messages: list[Message]) -> "Request":
        return replace(self, messages=messages)

    def fingerprint(self) -> str:
        """The replay key: what changes the output (model, messages, output-relevant settings, schema,
        tools), and nothing that does not (retries, timeouts)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [[m.role, m.content] for m in self.messages],
            "settings": asdict(self.settings),
            "schema": self.schema,
        }
        # Only present when used, so recordings made before tool calling keep their fingerprints.
        if self.tools:
            payload["tools"] = self.tools
        if any(m.tool_calls or m.tool_call_id for m in self.messages):
            payload["tool_turns"] = [[[asdict(c) for c in m.tool_calls], m.tool_call_id] for m in self.messages]
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def schema_instruction(schema: dict[str, Any]) -> str:
    """The instruction a request with a JSON schema carries where the vendor takes no schema parameter
    (Anthropic's system prompt): the schema itself, which forecasts count as part of the prompt."""
    return (
        "Reply with one JSON object and nothing else. It must match this JSON schema:\n"
        f"```json\n{json.dumps(schema)}\n```"
    )


class OfflineRule(Protocol):
    """A rule-based answer to one call, built by its caller from typed inputs (like Inspect AI's mock model).

    Returns text, or a dict when the caller asked for JSON (or, with tools, {"tool_calls": [...], "final": ...}).
    """

    def __call__(self, request: "Request", rng: random.Random) -> "str | dict[str, Any]": ...


@dataclass
class Completion:
    """A vendor's answer before JSON handling."""

    text: str
    usage: Usage
    model: str
    data: Any = None
    """Offline handlers may answer with the parsed JSON directly."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    headers: Any = None
    """The answer's HTTP headers (a case-insensitive mapping), where the vendor's rate limits are read."""
    stop_reason: str = ""
    """Why the model stopped, as the vendor says it ("length": cut at max_tokens); "" when not known."""


@dataclass
class LLMResult:
    """The answer a caller gets."""

    text: str
    data: Any
    """Parsed JSON when a schema was given, else None."""
    usage: Usage
    latency_ms: float
    provider: str
    model: str
    role: str
    attempts: int = 1
    cost_usd: float = 0.0
    tool_calls: list[ToolCall] = field(default_factory=list)
    request: "Request | None" = field(default=None, repr=False, compare=False)
    """The request as the caller made it (not a JSON repair's follow-up)."""
    repaired: str = ""
    """How a reply that was not valid JSON for the schema was made valid ("" when it was valid as it came):
    raw control characters escaped, or the model asked again with the reason."""

    @cached_property
    def fingerprint(self) -> str:
        """The request's replay key, what a recording of it is filed under: worked out when asked, since
        it encodes the whole conversation and a conversation's calls rarely need it."""
        return self.request.fingerprint() if self.request is not None else ""


class ProviderError(Exception):
    """Any failure of an LLM call; the message says which provider and why."""


class RetryableError(ProviderError):
    """A 429, 5xx, timeout or dropped connection; may be retried."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class NoReplyError(RetryableError):
    """No reply within the call's timeout: the model (or the agent behind it) stopped answering."""


class RetriesExhausted(ProviderError):
    """A retryable error persisted through every attempt; `last` is the last of them."""

    def __init__(self, message: str, last: RetryableError | None):
        super().__init__(message)
        self.last = last


class AuthError(ProviderError):
    """401/403: the key is missing or wrong. Never retried."""


class BadRequestError(ProviderError):
    """400 and other client errors. Never retried."""


class MissingKeyError(ProviderError):
    """A provider needs an environment variable that is not set."""


class ReplayMiss(ProviderError):
    """No recording for this request."""


class InvalidJSONError(PlainMessage, ProviderError):
    """The reply stayed invalid for the schema after one repair; raw replies are kept."""

    def __init__(self, message: str, raw: list[str]):
        super().__init__(message)
        self.raw = raw


class CostLimitReached(ProviderError):
    """The run's cost limit was reached; the run stops cleanly."""


class Provider(ABC):
    """One vendor. Subclasses implement generate(); retries, limits and JSON live in the client."""

    name: str = ""
    default_model: str = ""

    key_env: str = ""
    takes_seed: bool = False
    """Whether generate() sends settings.seed to the model (runs record it, so a reader knows)."""

    def __init__(
        self,
        *,
        model: str = "",
        base_url: str = "",
        options: dict[str, Any] | None = None,
        api_key: str | None = None,
        key_hint: str = "",
    ):
        self.model = model or self.default_model
        self.base_url = base_url
        self.options = dict(options or {})
        self.api_key = api_key
        """The key its requests carry, chosen by the registry (None: no key)."""
        self.key_hint = key_hint or self.key_env
        """Where that key comes from, for error messages."""

    def place_directive(self, messages: list[Message], directive: str) -> list[Message]:
        """Default (OpenAI): the directive is the last system message."""
        return [*messages, Message("system", directive)]

    def timeout_for(self, request: Request) -> float:
        """The timeout a call is given (a provider that measures its endpoint's speed may need longer)."""
        return request.timeout

    @abstractmethod
    def generate(self, request: Request) -> Completion:
        """Answer one request, raising a ProviderError subclass on failure."""


def status_error(provider: str, status: int, message: str, retry_after: float | None, key_env: str) -> ProviderError:
    """Map an HTTP status to the error a caller should see."""
    if status in (401, 403):
        return AuthError(
            f"{provider}: HTTP {status}, the API key was refused: check {key_env} (set, current, for this URL?)"
        )
    if status == 429 or status >= 500 or status in (408, 409):
        return RetryableError(f"{provider}: HTTP {status}: {message}", retry_after=retry_after)
    return BadRequestError(f"{provider}: HTTP {status}, the request was refused: {message}")


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header, if any."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms:
            return float(ms) / 1000.0
        value = headers.get("retry-after")
        return float(value) if value else None
    except (TypeError, ValueError):
        return None


def error_message(exc: Any) -> str:
    """The vendor's own error message from an SDK status error, else the exception text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", exc))
