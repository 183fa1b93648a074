"""The one way to call an LLM: retries with backoff, a per-provider concurrency limit, a rate-limit
budget shared by every worker, JSON with one repair, record/replay and usage accounting wrapped
around whichever vendor serves the role."""

import asyncio
import json
import os
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from evaluation.conf import setting
from evaluation.providers import ratelimit, replay
from evaluation.providers.accounting import Meter, estimate_cost
from evaluation.providers.base import (
    Completion,
    InvalidJSONError,
    LLMResult,
    Message,
    OfflineRule,
    Request,
    RetriesExhausted,
    RetryableError,
    Usage,
)
from evaluation.providers.registry import ProviderSpec, build, resolve, settings_for

_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def _semaphore(provider: str) -> threading.BoundedSemaphore:
    with _SEMAPHORES_LOCK:
        if provider not in _SEMAPHORES:
            _SEMAPHORES[provider] = threading.BoundedSemaphore(setting("LLM_CONCURRENCY"))
        return _SEMAPHORES[provider]


def parse_json(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(data, None) when text is JSON valid for schema (after read_json's repairs), else (None, the reason)."""
    data, reason, _ = read_json(text, schema)
    return data, reason


def read_json(
    text: str, schema: dict[str, Any], *, cut: bool = False, prompt: list[Message] | None = None
) -> tuple[Any, str | None, str]:
    """(data, None, repair) when text is JSON valid for schema, else (None, the reason, "").

    Small models answer in ways strict parsing refuses; what can be read without guessing is, and the
    repair is named ("" when none was needed): raw control characters (a newline) inside strings, one JSON
    object inside other text. What cannot be read gets a reason that says why: cut at max_tokens (`cut`:
    the vendor said it stopped there), the prompt echoed back, not JSON, or off the schema (a number
    outside its minimum and maximum, say)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    data, reason, repair = _loads(body)
    if reason is not None:
        start, end = body.find("{"), body.rfind("}")
        if 0 <= start < end and (start, end) != (0, len(body) - 1):
            inner, inner_reason, inner_repair = _loads(body[start : end + 1])
            if inner_reason is None:
                data, reason = inner, None
                repair = ", ".join(filter(None, ["one JSON object taken from the text around it", inner_repair]))
    if reason is not None:
        if cut:
            return None, f"was cut at max_tokens before its JSON ended ({reason})", ""
        if prompt and echoes(text, prompt):
            return None, f"echoes the prompt instead of answering ({reason})", ""
        return None, reason, ""
    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.absolute_path) or "(top level)"
        return None, f"does not match the schema at {where}: {first.message}", ""
    return data, None, repair


def _loads(body: str) -> tuple[Any, str | None, str]:
    try:
        return json.loads(body), None, ""
    except json.JSONDecodeError as exc:
        reason = f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        if not exc.msg.startswith("Invalid control character"):
            return None, reason, ""
    try:  # JSON but for raw control characters inside its strings, which strict parsing refuses
        return json.loads(body, strict=False), None, "raw control characters in strings read as text"
    except json.JSONDecodeError:
        return None, reason, ""


ECHO_LINE = 40
"""A line at least this long found verbatim in both the prompt and the reply makes the reply an echo."""


def echoes(reply: str, prompt: list[Message]) -> bool:
    """Whether a reply repeats a line of its prompt (a base model continuing the text it was given)."""
    said = "\n".join(m.content for m in prompt)
    replied = [line.strip() for line in reply.splitlines() if len(line.strip()) >= ECHO_LINE]
    asked = [line.strip() for line in said.splitlines() if len(line.strip()) >= ECHO_LINE]
    return any(line in said for line in replied) or any(line in reply for line in asked)


def retry_delay(attempt: int, retry_after: float | None, backoff: list[float]) -> float:
    """Seconds to wait before the next attempt: the server's Retry-After when it gave one (at most
    120 s), else "full jitter" (uniform between 0 and the attempt's backoff), so calls that failed
    together do not retry in lockstep."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), 120.0)
    if not backoff:
        return 0.0
    return random.uniform(0.0, backoff[min(attempt - 1, len(backoff) - 1)])


class LLM:
    """A role's model, ready to call. Build with get_llm(role)."""

    def __init__(self, spec: ProviderSpec, role: str, *, meter: Meter | None = None, record_dir: Path | None = None):
        self.spec = spec
        self.role = role
        self.provider = build(spec)
        self.meter = meter
        self.record_dir = record_dir
        self.max_attempts: int = setting("LLM_MAX_ATTEMPTS")
        self.backoff: list[float] = list(setting("LLM_BACKOFF_SECONDS"))
        self.timeout: float = setting("LLM_TIMEOUT_SECONDS")
        self.budget = self._budget()

    def _budget(self) -> ratelimit.Budget | None:
        """The shared rate-limit budget of the key, URL and model this role calls (None for providers that
        send nothing over HTTP, and where the config's options say {"rate_limit_budget": false})."""
        provider = self.provider
        if provider.name in ("offline", "replay") or provider.options.get("rate_limit_budget", True) is False:
            return None
        return ratelimit.budget_for(provider.name, provider.base_url, provider.model, provider.api_key)

    @property
    def label(self) -> str:
        return f"{self.provider.name}/{self.provider.model}"

    @property
    def is_offline(self) -> bool:
        return self.provider.name == "offline"

    def call(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        directive: str | None = None,
        offline: OfflineRule | None = None,
        **settings: Any,
    ) -> LLMResult:
        """One logical call (retries and a JSON repair included); raises a ProviderError on failure."""
        if self.meter:
            self.meter.check()
        placed = self.provider.place_directive(list(messages), directive) if directive else list(messages)
        request = Request(
            role=self.role,
            model=self.provider.model,
            messages=placed,
            settings=settings_for(self.role, self.spec, **settings),
            schema=schema,
            tools=tools or None,
            directive=directive,
            offline=offline,
            timeout=self.timeout,
        )
        request.timeout = self.provider.timeout_for(request)
        started = time.perf_counter()
        completion, attempts = self._generate(request)
        usage, data = completion.usage, completion.data
        repaired = ""
        if schema is not None and data is None and not completion.tool_calls:
            data, reason, repaired = read_json(
                completion.text, schema, cut=completion.stop_reason == "length", prompt=placed
            )
            if reason is not None:
                repair = request.with_messages(
                    [
                        *placed,
                        Message("assistant", completion.text),
                        Message("user", f"Your reply {reason}. Reply again with only the corrected JSON object."),
                    ]
                )
                second, more = self._generate(repair)
                attempts += more
                usage = usage + second.usage
                data, reason2, _ = read_json(second.text, schema, cut=second.stop_reason == "length", prompt=placed)
                if reason2 is not None:
                    self._account(usage)
                    raise InvalidJSONError(
                        f"{self.label} ({self.role}): reply {reason}; after one repair it still {reason2}",
                        raw=[completion.text, second.text],
                    )
                completion = second
                repaired = f"asked again: the reply {reason}"
        cost = self._account(usage)
        return LLMResult(
            text=completion.text,
            data=data,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            provider=self.provider.name,
            model=completion.model,
            role=self.role,
            attempts=attempts,
            request=request,
            cost_usd=cost,
            tool_calls=list(completion.tool_calls),
            repaired=repaired,
        )

    async def acall(self, messages: list[Message], **kwargs: Any) -> LLMResult:
        """The same call from async code (the WebSocket side); runs in a worker thread, except the
        offline provider's, which takes microseconds of CPU: a thread hop would cost more than it."""
        if self.is_offline:
            return self.call(messages, **kwargs)
        return await asyncio.to_thread(self.call, messages, **kwargs)

    def _account(self, usage: Usage) -> float:
        cost = estimate_cost(self.provider.model, usage)
        if self.meter:
            self.meter.add(self.role, usage, cost, provider=self.provider.name, model=self.provider.model)
        return cost

    def _generate(self, request: Request) -> tuple[Completion, int]:
        last: RetryableError | None = None
        budget = self.budget
        for attempt in range(1, self.max_attempts + 1):
            ticket = None
            try:
                if budget is not None and budget.active:
                    needs = {"requests": 1, "tokens": self._estimate(request)}
                    ticket = budget.acquire(needs, request.timeout)
                with _semaphore(self.provider.name):
                    completion = self.provider.generate(request)
            except RetryableError as exc:
                last = exc
                if budget is not None:
                    budget.settle(ticket, None)
                    if exc.retry_after:  # the server's word pauses every worker's calls on this budget
                        budget.pause(exc.retry_after)
                if attempt < self.max_attempts:
                    time.sleep(retry_delay(attempt, exc.retry_after, self.backoff))
                continue
            except BaseException:
                if budget is not None:
                    budget.settle(ticket, None)
                raise
            if budget is not None:
                budget.settle(ticket, completion.headers)
            if self.record_dir is not None:
                replay.record(self.record_dir, request, completion, self.provider.name)
            return completion, attempt
        raise RetriesExhausted(
            f"{self.label} ({self.role}): gave up after {self.max_attempts} attempts; last error: {last}", last
        )

    @staticmethod
    def _estimate(request: Request) -> int:
        return ratelimit.estimate_tokens(request.messages, request.schema, request.tools)


def get_llm(
    role: str,
    *,
    override: str | ProviderSpec | None = None,
    meter: Meter | None = None,
    record_dir: Path | str | None = None,
) -> LLM:
    """The LLM serving a role. record_dir (or EVAL_RECORD=1) writes every answer for later replay."""
    spec = resolve(role, override)
    if record_dir is None and spec.options.get("record"):
        record_dir = setting("RECORDINGS_DIR")
    if record_dir is None and os.environ.get("EVAL_RECORD") == "1":
        record_dir = setting("RECORDINGS_DIR")
    return LLM(spec, role, meter=meter, record_dir=Path(record_dir) if record_dir else None)
