"""Work that can wait, through a vendor's batch API: OpenAI's Batch API (an input file, a batch, an output
file) and Anthropic's Message Batches, with the official SDKs; the offline provider completes a batch at
once, and replay answers its lines from the recordings.

A batch is stored (ProviderBatch) before it is sent, with its custom ids and what each maps back to, so a
process that dies while it waits is resumed by the next one that asks for the same job: it polls the
stored batch instead of sending another. On the wire each line's custom id is short ("l0", "l1", ... by the
sorted keys), so it fits Anthropic's ^[a-zA-Z0-9_-]{1,64}$ whatever the caller's keys are.

A line the vendor failed on its own (or answered with JSON that does not fit the schema) is retried as a
direct call through the normal client, and counted. A whole batch that failed (the vendor refused it, for
an enqueued-token limit say), expired or was cancelled is named (ProviderBatch.reason keeps the vendor's
words) and its unanswered lines are sent again as a new batch, in smaller batches when the vendor's size or
token limits were the reason, at most MAX_RESENDS times; a batch cancelled at the vendor (by a person) is
not sent again: its lines fail with that reason. Batch lines are priced with estimate_cost(model, usage,
batch=True) and added to the caller's meter as any call is; Anthropic lines ask for the 1-hour cache.
"""

import hashlib
import io
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluation.conf import setting
from evaluation.providers import replay
from evaluation.providers.accounting import estimate_cost
from evaluation.providers.base import (
    BadRequestError,
    Completion,
    LLMResult,
    Message,
    OfflineRule,
    ProviderError,
    Request,
    RetryableError,
    Usage,
    error_message,
    parse_retry_after,
    status_error,
)
from evaluation.providers.client import LLM, parse_json
from evaluation.providers.registry import settings_for

BATCH_VENDORS = ("openai", "anthropic", "anthropic-haiku", "offline", "replay")
"""Providers that take a batch: the two vendors' batch APIs, and the two that answer locally."""


@dataclass(frozen=True)
class BatchCall:
    """One call of a batch, as LLM.call would take it (so a failed line is retried with the same arguments)."""

    messages: tuple[Message, ...]
    schema: dict[str, Any] | None = None
    offline: OfflineRule | None = field(default=None, compare=False)
    directive: str | None = None
    settings: tuple[tuple[str, Any], ...] = ()
    """Generation settings for this call (seed=repeat, ...), as (name, value) pairs."""


@dataclass(frozen=True)
class BatchProgress:
    """What the vendor says of a batch it holds, counted as the vendor counts (Anthropic counts no line
    done until the whole batch has ended)."""

    provider_state: str
    ended: bool
    total: int
    done: int
    failed: int
    reason: str = ""
    """Why the whole batch failed, expired or was cancelled, in the vendor's words ("" when it did not)."""
    too_big: bool = False
    """The vendor refused it for its size or its tokens: send its lines again in smaller batches."""


@dataclass(frozen=True)
class Unsent:
    """A line the vendor never answered because the whole batch failed, expired or was cancelled."""

    reason: str
    cancelled: bool = False


WIRE_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Anthropic's pattern for a custom id (OpenAI's are free text): every wire id fits it."""
MAX_RESENDS = 3
"""A batch whose whole is failed or expired this many times gives its remaining lines up (named)."""
MAX_LINES = {"openai": 50_000, "anthropic": 100_000}
"""Requests one batch may hold (OpenAI's Batch API; Anthropic's Message Batches)."""
MAX_BYTES = {"openai": 200_000_000, "anthropic": 256_000_000}
"""The largest input one batch may have (OpenAI's input file; Anthropic's request body)."""


def wire_ids(keys: Any) -> dict[str, str]:
    """The custom id each of the caller's keys gets on the wire: short and unique by construction."""
    return {key: f"l{n}" for n, key in enumerate(sorted(keys))}


@dataclass(frozen=True)
class BatchOutcome:
    """What a batch gave its caller, once every line is answered or given up."""

    batch_pk: int
    answers: dict[str, LLMResult]
    """custom id -> the answer (from the batch, or a direct retry)."""
    failed: dict[str, str]
    """custom id -> why it failed in the batch and again as a direct call."""
    retried: int
    """Lines answered by a direct call after the batch failed them."""
    usage: Usage
    cost_usd: float
    resumed: bool
    """True when a stored batch was polled instead of a new one sent."""


def wants_batch(llm: LLM) -> bool:
    """The LLM config asks for batches (options {"batch": true})."""
    return bool(llm.spec.options.get("batch"))


def request_for(llm: LLM, call: BatchCall) -> Request:
    """The request LLM.call would send for this call (the directive placed, the role's settings applied)."""
    messages = list(call.messages)
    placed = llm.provider.place_directive(messages, call.directive) if call.directive else messages
    return Request(
        role=llm.role,
        model=llm.provider.model,
        messages=placed,
        settings=settings_for(llm.role, llm.spec, **dict(call.settings)),
        schema=call.schema,
        directive=call.directive,
        offline=call.offline,
        timeout=llm.timeout,
    )


def job_key(kind: str, llm: LLM, job: dict[str, Any]) -> str:
    """The same kind of work, for the same job and judge, resumes the same stored batch."""
    where = llm.spec.base_url
    body = json.dumps([kind, llm.label, where, job], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


# --- the vendors' wire formats --------------------------------------------------------------------
class _Vendor:
    """Submit, poll and fetch one batch at one vendor."""

    def __init__(self, llm: LLM):
        self.llm = llm
        self.provider = llm.provider

    def submit(self, requests: dict[str, Request]) -> str:
        raise NotImplementedError

    def poll(self, batch_id: str, total: int) -> BatchProgress:
        raise NotImplementedError

    def fetch(self, batch_id: str, requests: dict[str, Request]) -> dict[str, "Completion | str | Unsent"]:
        """custom id -> the completion, why the line failed, or Unsent when the whole batch failed it."""
        raise NotImplementedError

    family = ""
    """The vendor whose batch limits apply (MAX_LINES, MAX_BYTES); "" for none."""

    def line_bytes(self, request: Request) -> int:
        """About what one line adds to the batch's input."""
        return 0


class _Local(_Vendor):
    """offline and replay: the batch is answered now, line by line, by the provider itself."""

    def submit(self, requests: dict[str, Request]) -> str:
        return f"{self.provider.name}-{uuid.uuid4().hex}"

    def poll(self, batch_id: str, total: int) -> BatchProgress:
        return BatchProgress("completed", True, total, total, 0)

    def fetch(self, batch_id: str, requests: dict[str, Request]) -> dict[str, Completion | str | Unsent]:
        out: dict[str, Completion | str | Unsent] = {}
        for custom_id, request in requests.items():
            try:
                out[custom_id] = self.provider.generate(request)
            except ProviderError as exc:
                out[custom_id] = str(exc)
        return out


def _sdk_errors(vendor: str, key_hint: str, sdk: Any) -> Callable[[Exception], ProviderError]:
    def convert(exc: Exception) -> ProviderError:
        if isinstance(exc, sdk.APIStatusError):
            return status_error(
                vendor, exc.status_code, error_message(exc), parse_retry_after(exc.response.headers), key_hint
            )
        if isinstance(exc, sdk.APIConnectionError):
            return RetryableError(f"{vendor}: connection failed ({exc.__cause__ or exc})")
        return ProviderError(f"{vendor}: {type(exc).__name__}: {exc}")

    return convert


class _OpenAI(_Vendor):
    """POST /v1/files (purpose batch) with one JSONL line per request, POST /v1/batches, then the output and
    error files. A typed base URL (an OpenAI-compatible server) gets chat-completion lines."""

    def __init__(self, llm: LLM):
        super().__init__(llm)
        import openai

        self.sdk = openai
        self.client = openai.OpenAI(
            api_key=self.provider.api_key or "none",
            base_url=self.provider.base_url or None,
            max_retries=SDK_RETRIES,
            timeout=SDK_TIMEOUT_SECONDS,
        )
        self.api = getattr(self.provider, "api", "responses")
        self.url = "/v1/chat/completions" if self.api == "chat" else "/v1/responses"
        self.convert = _sdk_errors(self.provider.name, self.provider.key_hint, openai)

    def body(self, request: Request) -> dict[str, Any]:
        from evaluation.providers.openai_api import chat_body, responses_body

        if self.api == "chat":
            return chat_body(request)
        return dict(responses_body(request, cache=self.provider.options.get("prompt_cache", True) is not False))

    family = "openai"

    def line_bytes(self, request: Request) -> int:
        return len(json.dumps(self.body(request))) + 80

    def submit(self, requests: dict[str, Request]) -> str:
        wire = wire_ids(requests)
        lines = "".join(
            json.dumps({"custom_id": wire[cid], "method": "POST", "url": self.url, "body": self.body(r)}) + "\n"
            for cid, r in requests.items()
        )
        try:
            uploaded = self.client.files.create(file=("batch.jsonl", io.BytesIO(lines.encode())), purpose="batch")
            batch = self.client.batches.create(
                input_file_id=uploaded.id,
                endpoint=self.url,  # type: ignore[arg-type]
                completion_window="24h",
            )
        except self.sdk.OpenAIError as exc:
            raise self.convert(exc) from exc
        return batch.id

    def poll(self, batch_id: str, total: int) -> BatchProgress:
        try:
            batch = self.client.batches.retrieve(batch_id)
        except self.sdk.OpenAIError as exc:
            raise self.convert(exc) from exc
        return self._progress(batch, total)

    def _progress(self, batch: Any, total: int) -> BatchProgress:
        counts = batch.request_counts
        ended = batch.status in ("completed", "failed", "expired", "cancelled")
        errors = [e for e in ((batch.errors.data if batch.errors else None) or [])]
        codes = {e.code or "" for e in errors}
        reason = ""
        if batch.status == "failed":
            told = "; ".join(f"{e.code}: {e.message}" if e.code else str(e.message) for e in errors)
            reason = f"failed: {told or 'the vendor gave no reason'}"
        elif batch.status == "expired":
            reason = "expired: the vendor did not finish it within its 24-hour window"
        elif batch.status == "cancelled":
            reason = "cancelled at the vendor"
        return BatchProgress(
            provider_state=batch.status,
            ended=ended,
            total=(counts.total if counts else 0) or total,
            done=counts.completed if counts else 0,
            failed=counts.failed if counts else 0,
            reason=reason,
            too_big=bool(codes & {"token_limit_exceeded", "too_many_requests", "file_too_large"}),
        )

    def _lines(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        try:
            text = self.client.files.content(file_id).text
        except self.sdk.OpenAIError as exc:
            raise self.convert(exc) from exc
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def fetch(self, batch_id: str, requests: dict[str, Request]) -> dict[str, Completion | str | Unsent]:
        try:
            batch = self.client.batches.retrieve(batch_id)
        except self.sdk.OpenAIError as exc:
            raise self.convert(exc) from exc
        key_of = {wire: key for key, wire in wire_ids(requests).items()}
        whole = self.poll_reason(batch)
        out: dict[str, Completion | str | Unsent] = {}
        for line in self._lines(batch.output_file_id) + self._lines(batch.error_file_id):
            custom_id = key_of.get(str(line.get("custom_id")))
            if custom_id is None:
                continue
            response = line.get("response") or {}
            if line.get("error") or response.get("status_code") != 200:
                error = line.get("error") or (response.get("body") or {}).get("error") or {}
                code = error.get("code") if isinstance(error, dict) else None
                if code in ("batch_expired", "batch_cancelled") and whole:
                    out[custom_id] = Unsent(whole, cancelled=code == "batch_cancelled")
                    continue
                out[custom_id] = f"HTTP {response.get('status_code')}: {error.get('message', error)}"
                continue
            try:
                out[custom_id] = self.completion(response["body"], requests[custom_id])
            except (KeyError, TypeError, ValueError) as exc:
                out[custom_id] = f"malformed line ({type(exc).__name__}: {exc})"
        for custom_id in requests:
            if whole:
                out.setdefault(custom_id, Unsent(whole, cancelled=batch.status == "cancelled"))
            out.setdefault(custom_id, f"the batch ended {batch.status} without an answer for this line")
        return out

    def poll_reason(self, batch: Any) -> str:
        return self.progress_of(batch).reason

    def progress_of(self, batch: Any) -> BatchProgress:
        return self._progress(batch, 0)

    def completion(self, body: dict[str, Any], request: Request) -> Completion:
        usage = body.get("usage") or {}
        if self.api == "chat":
            message = (body["choices"][0] or {}).get("message") or {}
            details = usage.get("prompt_tokens_details") or {}
            return Completion(
                text=message.get("content") or "",
                model=body.get("model") or request.model,
                usage=Usage(
                    input_tokens=usage.get("prompt_tokens") or 0,
                    output_tokens=usage.get("completion_tokens") or 0,
                    calls=1,
                    cached_input_tokens=details.get("cached_tokens") or 0,
                    cache_write_tokens=details.get("cache_write_tokens") or 0,
                ),
            )
        text = "".join(
            part.get("text", "")
            for item in body.get("output") or []
            if item.get("type") == "message"
            for part in item.get("content") or []
            if part.get("type") == "output_text"
        )
        out_details = usage.get("output_tokens_details") or {}
        in_details = usage.get("input_tokens_details") or {}
        return Completion(
            text=text,
            model=body.get("model") or request.model,
            usage=Usage(
                input_tokens=usage.get("input_tokens") or 0,
                output_tokens=usage.get("output_tokens") or 0,
                thinking_tokens=out_details.get("reasoning_tokens") or 0,
                calls=1,
                cached_input_tokens=in_details.get("cached_tokens") or 0,
                cache_write_tokens=in_details.get("cache_write_tokens") or 0,
            ),
        )


class _Anthropic(_Vendor):
    """POST /v1/messages/batches with {custom_id, params} per request (never streamed), then its results."""

    def __init__(self, llm: LLM):
        super().__init__(llm)
        import anthropic

        self.sdk = anthropic
        self.client = anthropic.Anthropic(
            api_key=self.provider.api_key or "none",
            base_url=self.provider.base_url or None,
            max_retries=SDK_RETRIES,
            timeout=SDK_TIMEOUT_SECONDS,
        )
        self.convert = _sdk_errors(self.provider.name, self.provider.key_hint, anthropic)

    def params(self, request: Request) -> dict[str, Any]:
        """The direct call's parameters (cache breakpoints included: a batch's lines share the rubric's prefix)."""
        from evaluation.providers.anthropic_api import BATCH_TTL, message_params

        cache = self.provider.options.get("prompt_cache", True) is not False
        return dict(message_params(request, cache=cache, ttl=BATCH_TTL))

    family = "anthropic"

    def line_bytes(self, request: Request) -> int:
        return len(json.dumps(self.params(request))) + 40

    def submit(self, requests: dict[str, Request]) -> str:
        wire = wire_ids(requests)
        try:
            batch = self.client.messages.batches.create(
                requests=[{"custom_id": wire[cid], "params": self.params(r)} for cid, r in requests.items()]  # type: ignore[typeddict-item]
            )
        except self.sdk.AnthropicError as exc:
            raise self.convert(exc) from exc
        return batch.id

    def poll(self, batch_id: str, total: int) -> BatchProgress:
        try:
            batch = self.client.messages.batches.retrieve(batch_id)
        except self.sdk.AnthropicError as exc:
            raise self.convert(exc) from exc
        c = batch.request_counts
        reason = ""
        if batch.processing_status == "ended" and c.expired:
            reason = f"expired: {c.expired} of its lines were not processed within the vendor's 24 hours"
        elif batch.processing_status == "ended" and c.canceled:
            reason = f"cancelled at the vendor ({c.canceled} of its lines unprocessed)"
        # Anthropic counts a line only when the whole batch has ended: while it runs, done stays 0.
        return BatchProgress(
            provider_state=batch.processing_status,
            ended=batch.processing_status == "ended",
            total=(c.processing + c.succeeded + c.errored + c.canceled + c.expired) or total,
            done=c.succeeded,
            failed=c.errored + c.canceled + c.expired,
            reason=reason,
        )

    def fetch(self, batch_id: str, requests: dict[str, Request]) -> dict[str, Completion | str | Unsent]:
        from evaluation.providers.anthropic_api import long_cache_writes

        out: dict[str, Completion | str | Unsent] = {}
        key_of = {wire: key for key, wire in wire_ids(requests).items()}
        try:
            for line in self.client.messages.batches.results(batch_id):
                custom_id = key_of.get(line.custom_id)
                if custom_id is None:
                    continue
                result = line.result
                if result.type == "expired":
                    out[custom_id] = Unsent("expired: not processed within the vendor's 24 hours")
                    continue
                if result.type == "canceled":
                    out[custom_id] = Unsent("cancelled at the vendor", cancelled=True)
                    continue
                if result.type != "succeeded":
                    detail = getattr(getattr(getattr(result, "error", None), "error", None), "message", "")
                    out[custom_id] = f"{result.type}{': ' + detail if detail else ''}"
                    continue
                message = result.message
                usage = message.usage
                read = getattr(usage, "cache_read_input_tokens", 0) or 0
                write = getattr(usage, "cache_creation_input_tokens", 0) or 0
                thinking = "".join(getattr(b, "thinking", "") for b in message.content if b.type == "thinking")
                out[custom_id] = Completion(
                    text="".join(getattr(b, "text", "") for b in message.content if b.type == "text"),
                    model=message.model or requests[custom_id].model,
                    usage=Usage(
                        input_tokens=(usage.input_tokens or 0) + read + write,
                        output_tokens=usage.output_tokens or 0,
                        thinking_tokens=len(thinking) // 4,
                        calls=1,
                        cached_input_tokens=read,
                        cache_write_tokens=write,
                        cache_write_long_tokens=long_cache_writes(usage),
                    ),
                )
        except self.sdk.AnthropicError as exc:
            raise self.convert(exc) from exc
        for custom_id in requests:
            out.setdefault(custom_id, "the batch ended without an answer for this line")
        return out


def vendor_for(llm: LLM) -> _Vendor:
    name = llm.provider.name
    if name in ("offline", "replay"):
        return _Local(llm)
    if name == "openai":
        return _OpenAI(llm)
    if name in ("anthropic", "anthropic-haiku"):
        return _Anthropic(llm)
    raise BadRequestError(f"{name}: has no batch API; leave batch off for this provider")


# --- the runner -------------------------------------------------------------------------------------
def poll_seconds() -> float:
    return float(setting("BATCH_POLL_SECONDS"))


def batch_run(
    llm: LLM,
    *,
    kind: str,
    job: dict[str, Any],
    targets: dict[str, Any],
    call_for: Callable[[Any], BatchCall],
    store: Callable[[dict[str, LLMResult], dict[str, str]], None],
    on_progress: Callable[[int, int], None] | None = None,
    run_id: str = "",
    wait: bool = True,
    keep_results: bool = False,
) -> BatchOutcome | None:
    """Send `targets` (custom id -> what its answer maps back to, JSON-able) as one batch, or resume the
    stored batch of the same job, wait for it (polling every BATCH_POLL_SECONDS), retry failed lines one by
    one, and hand every answer to `store` in the same transaction that marks the batch applied.

    call_for(target) builds a line's call; it is called again on a resume, from the stored targets.
    keep_results stores every answer on the row too (ProviderBatch.results), for callers that each take
    their own answer later (one run per line); the caller's LLM should then carry no meter, as each
    line's cost goes to its own run.
    on_progress(done, total) follows each poll. With wait=False it polls once and returns None while
    the batch is still open (a worker's polling task). Returns None also when there was nothing to send.
    """
    from evaluation.models import BatchState, ProviderBatch

    key = job_key(kind, llm, job)
    row = ProviderBatch.objects.filter(kind=kind, job_key=key, state__in=(BatchState.SUBMITTING, BatchState.WAITING))
    stored = row.order_by("created_at").first()
    resumed = stored is not None and stored.state == BatchState.WAITING
    if stored is None:
        if not targets:
            return None
        stored = ProviderBatch.objects.create(
            vendor=llm.provider.name,
            model=llm.provider.model,
            base_url=llm.spec.base_url,
            kind=kind,
            job_key=key,
            job=job,
            custom_ids=targets,
            total=len(targets),
            run_id=run_id,
        )
    if stored.state == BatchState.SUBMITTING:
        _send(stored, llm, call_for)
    return batch_resume(
        stored,
        llm,
        call_for=call_for,
        store=store,
        on_progress=on_progress,
        wait=wait,
        resumed=resumed,
        keep_results=keep_results,
    )


def batch_continue(
    stored: Any,
    llm: LLM,
    *,
    call_for: Callable[[Any], BatchCall],
    store: Callable[[dict[str, LLMResult], dict[str, str]], None] = lambda answers, failed: None,
    on_progress: Callable[[int, int], None] | None = None,
    keep_results: bool = False,
    wait: bool = True,
) -> BatchOutcome | None:
    """Drive a stored batch to its end whatever state it was left in: send it if nobody has, then wait
    (or, wait=False, poll once), fetch, retry and store. None when it had already ended (applied or
    failed) or, not waiting, is still open."""
    from evaluation.models import BatchState

    if stored.state == BatchState.SUBMITTING:
        _send(stored, llm, call_for)
    if stored.state != BatchState.WAITING:
        return None
    return batch_resume(
        stored, llm, call_for=call_for, store=store, on_progress=on_progress, keep_results=keep_results, wait=wait
    )


SDK_TIMEOUT_SECONDS = 120.0
SDK_RETRIES = 2
"""Each batch API request (an upload included) gets this long, and this many retries."""

SENDING = "sending:"
"""The provider id of a row one process is sending now (its claim); others wait for the real id."""
SEND_TAKEOVER_SECONDS = SDK_TIMEOUT_SECONDS * (SDK_RETRIES + 1) * 2 + 60.0
"""A claim older than this belongs to a process that died while sending: another sends the batch again.
It outlasts a send that is only slow (the upload and the create, each with every retry), so a second batch
is never bought while the first send may still succeed."""


def _send(stored: Any, llm: LLM, call_for: Callable[[Any], BatchCall]) -> None:
    """Send a stored batch that has no provider id yet, once across processes: the process whose conditional
    update claims the row sends it; the others wait for the id it stores. A claim older than
    SEND_TAKEOVER_SECONDS is taken over (its process died before the vendor answered, so there is nothing
    to resume: the vendor never gave it an id)."""
    from evaluation.models import BatchState, ProviderBatch

    while True:
        stored.refresh_from_db()
        if stored.state != BatchState.SUBMITTING:
            if stored.state == BatchState.FAILED:
                raise ProviderError(f"batch {stored.pk} could not be sent: {stored.error}")
            return
        token = f"{SENDING}{uuid.uuid4().hex}"
        claim = ProviderBatch.objects.filter(pk=stored.pk, state=BatchState.SUBMITTING)
        stale = timezone.now() - timedelta(seconds=SEND_TAKEOVER_SECONDS)
        if stored.provider_batch_id.startswith(SENDING) and stored.updated_at > stale:
            time.sleep(min(poll_seconds(), 5.0))  # another process is sending it
            continue
        if claim.filter(provider_batch_id=stored.provider_batch_id).update(
            provider_batch_id=token, updated_at=timezone.now()
        ):
            break
    vendor = vendor_for(llm)
    carried = dict(stored.carried or {})
    if "sent" not in carried:  # the first send: as many lines as one batch of this vendor may hold
        requests_all = {cid: request_for(llm, call_for(t)) for cid, t in stored.custom_ids.items()}
        carried["sent"] = _chunk(vendor, requests_all, len(requests_all))
        carried["chunk"] = len(carried["sent"])
        ProviderBatch.objects.filter(pk=stored.pk).update(carried=carried)
        stored.carried = carried
    requests = {cid: request_for(llm, call_for(stored.custom_ids[cid])) for cid in carried["sent"]}
    try:
        batch_id = vendor.submit(requests)
    except ProviderError as exc:
        ProviderBatch.objects.filter(pk=stored.pk).update(
            state=BatchState.FAILED, error=str(exc)[:2000], reason=_joined(stored.reason, f"refused: {exc}")
        )
        raise
    ProviderBatch.objects.filter(pk=stored.pk, provider_batch_id=token).update(
        provider_batch_id=batch_id, state=BatchState.WAITING, updated_at=timezone.now()
    )
    stored.refresh_from_db()


def batch_resume(
    stored: Any,
    llm: LLM,
    *,
    call_for: Callable[[Any], BatchCall],
    store: Callable[[dict[str, LLMResult], dict[str, str]], None],
    on_progress: Callable[[int, int], None] | None = None,
    wait: bool = True,
    resumed: bool = True,
    keep_results: bool = False,
) -> BatchOutcome | None:
    """Poll a stored batch until it ends (or once, with wait=False), then fetch, retry and store. A whole
    batch the vendor failed or expired has its unanswered lines sent again as a new batch (the row keeps the
    answers so far in `carried`), and is polled again."""
    from evaluation.models import BatchState, ProviderBatch

    vendor = vendor_for(llm)
    calls = {cid: call_for(t) for cid, t in stored.custom_ids.items()}
    while True:
        progress = vendor.poll(stored.provider_batch_id, stored.total)
        ProviderBatch.objects.filter(pk=stored.pk).update(
            provider_state=progress.provider_state,
            done=progress.done,
            failed=progress.failed,
            polls=stored.polls + 1,
            updated_at=timezone.now(),
        )
        stored.polls += 1
        stored.done, stored.failed, stored.provider_state = progress.done, progress.failed, progress.provider_state
        if on_progress is not None:
            on_progress(progress.done, stored.total)
        if not progress.ended:
            if not wait:
                return None
            time.sleep(poll_seconds())
            continue
        carried = dict(stored.carried or {})
        sent = list(carried.get("sent") or sorted(calls))
        requests = {cid: request_for(llm, calls[cid]) for cid in sent}
        lines = vendor.fetch(stored.provider_batch_id, requests)
        answers, failed = _take_lines(llm, lines, requests, calls, carried)
        unsent = {cid: line for cid, line in lines.items() if isinstance(line, Unsent)}
        reason = progress.reason or next((u.reason for u in unsent.values()), "")
        for cid, line in unsent.items():
            if line.cancelled or stored.resends >= MAX_RESENDS:
                why = line.reason if line.cancelled else f"{line.reason} (sent {stored.resends + 1} times)"
                failed[cid] = f"the whole batch: {why}"
        done = set(carried.get("answers") or {}) | set(carried.get("failed") or {}) | set(answers) | set(failed)
        pending = sorted(cid for cid in calls if cid not in done)
        if not pending:
            break
        # Lines still to send: a whole-batch failure's (a new batch, smaller when its size was the reason), or
        # the next chunk of a job larger than one batch may hold.
        chunk = int(carried.get("chunk") or len(pending))
        if progress.too_big:
            chunk = max(1, len(sent) // 2)
        carried = _carry(carried, answers, failed)
        pending_requests = {cid: request_for(llm, calls[cid]) for cid in pending}
        carried["sent"] = _chunk(vendor, pending_requests, chunk)
        carried["chunk"] = chunk
        again = bool(unsent)
        moved = ProviderBatch.objects.filter(
            pk=stored.pk, state=BatchState.WAITING, provider_batch_id=stored.provider_batch_id
        ).update(
            state=BatchState.SUBMITTING,
            provider_batch_id="",
            carried=carried,
            resends=stored.resends + (1 if again else 0),
            reason=_joined(stored.reason, f"batch {stored.provider_batch_id} {reason}") if again else stored.reason,
            done=0,
            failed=0,
            updated_at=timezone.now(),
        )
        if not moved:  # another process took this ended batch on
            return None
        stored.refresh_from_db()
        _send(stored, llm, call_for)
        resumed = True
    carried = _carry(carried, answers, failed)
    answers = {**_carried_answers(carried, llm.role), **answers}
    failed = dict(carried.get("failed") or {})
    usage = Usage.from_dict(carried.get("usage"))
    cost = float(carried.get("cost_usd") or 0.0)
    retried = int(carried.get("retried") or 0)
    with transaction.atomic():
        # Conditional: two processes that fetched the same ended batch store it once.
        won = ProviderBatch.objects.filter(pk=stored.pk, state=BatchState.WAITING).update(
            state=BatchState.APPLIED,
            retried=retried,
            lost=len(failed),
            usage=usage.as_dict(),
            cost_usd=cost,
            error="\n".join(f"{cid}: {why}" for cid, why in list(failed.items())[:50]),
            results=_kept(answers, failed) if keep_results else {},
            carried={},
        )
        if won:
            store(answers, failed)
    return BatchOutcome(
        batch_pk=stored.pk,
        answers=answers if won else {},
        failed=failed,
        retried=retried,
        usage=usage,
        cost_usd=cost,
        resumed=resumed,
    )


def _take_lines(
    llm: LLM,
    lines: dict[str, "Completion | str | Unsent"],
    requests: dict[str, Request],
    calls: dict[str, BatchCall],
    carried: dict[str, Any],
) -> tuple[dict[str, LLMResult], dict[str, str]]:
    """The answers of one ended vendor batch (priced, metered, recorded), and the lines that failed again
    as direct calls; a line the vendor failed on its own is retried as a direct call. Usage, cost and the
    retry count are added to `carried`."""
    answers: dict[str, LLMResult] = {}
    usage, cost = Usage.from_dict(carried.get("usage")), float(carried.get("cost_usd") or 0.0)
    retry: list[str] = []
    for cid, line in lines.items():
        if isinstance(line, Unsent):
            continue
        if isinstance(line, str):
            retry.append(cid)
            continue
        if llm.record_dir is not None:
            replay.record(llm.record_dir, requests[cid], line, llm.provider.name)
        line_cost = estimate_cost(llm.provider.model, line.usage, batch=True)
        usage, cost = usage + line.usage, cost + line_cost
        if llm.meter is not None:
            llm.meter.add(llm.role, line.usage, line_cost, provider=llm.provider.name, model=llm.provider.model)
        data = line.data
        schema = calls[cid].schema
        if schema is not None and data is None:
            data, reason = parse_json(line.text, schema)
            if reason is not None:
                retry.append(cid)  # the direct call repairs the JSON once, as every call does
                continue
        answers[cid] = LLMResult(
            text=line.text,
            data=data,
            usage=line.usage,
            latency_ms=0.0,
            provider=llm.provider.name,
            model=line.model,
            role=llm.role,
            cost_usd=line_cost,
            request=requests[cid],
        )
    failed: dict[str, str] = {}
    for cid in sorted(retry):
        call = calls[cid]
        try:
            result = llm.call(
                list(call.messages),
                schema=call.schema,
                directive=call.directive,
                offline=call.offline,
                **dict(call.settings),
            )
        except ProviderError as exc:
            failed[cid] = f"{lines[cid] if isinstance(lines[cid], str) else 'invalid JSON'}; direct call: {exc}"
            continue
        answers[cid] = result
        usage, cost = usage + result.usage, cost + result.cost_usd
    carried["usage"], carried["cost_usd"] = usage.as_dict(), cost
    carried["retried"] = int(carried.get("retried") or 0) + len(retry) - len(failed)
    return answers, failed


def _carry(carried: dict[str, Any], answers: dict[str, LLMResult], failed: dict[str, str]) -> dict[str, Any]:
    """carried with these answers and failures added (as the row keeps them between vendor batches)."""
    out = dict(carried)
    out["answers"] = {**(carried.get("answers") or {}), **_kept(answers, {})}
    out["failed"] = {**(carried.get("failed") or {}), **failed}
    return out


def _carried_answers(carried: dict[str, Any], role: str) -> dict[str, LLMResult]:
    return {cid: _result_from(kept, role) for cid, kept in (carried.get("answers") or {}).items()}


def _chunk(vendor: _Vendor, requests: dict[str, Request], most: int) -> list[str]:
    """The first lines (by key) one batch of this vendor may hold: at most `most`, its line limit and its
    byte limit."""
    limit = min(most, MAX_LINES.get(vendor.family, most)) or 1
    room = MAX_BYTES.get(vendor.family, 0)
    out: list[str] = []
    size = 0
    for cid in sorted(requests):
        if len(out) >= limit:
            break
        if room:
            size += vendor.line_bytes(requests[cid])
            if out and size > room:
                break
        out.append(cid)
    return out


def _joined(before: str, line: str) -> str:
    return "\n".join(part for part in (before, line[:1000]) if part)[-4000:]


def _kept(answers: dict[str, LLMResult], failed: dict[str, str]) -> dict[str, Any]:
    kept: dict[str, Any] = {
        cid: {
            "text": r.text,
            "data": r.data,
            "provider": r.provider,
            "model": r.model,
            "usage": r.usage.as_dict(),
            "cost_usd": r.cost_usd,
        }
        for cid, r in answers.items()
    }
    kept.update({cid: {"error": why} for cid, why in failed.items()})
    return kept


def kept_result(stored: Any, custom_id: str, role: str) -> LLMResult:
    """One line's answer from a batch kept with keep_results; ProviderError with the reason when it failed."""
    kept = (stored.results or {}).get(custom_id)
    if kept is None:
        raise ProviderError(f"batch {stored.provider_batch_id}: no answer kept for {custom_id}")
    if "error" in kept:
        raise ProviderError(f"batch {stored.provider_batch_id}: {custom_id} failed: {kept['error']}")
    return _result_from(kept, role)


def _result_from(kept: dict[str, Any], role: str) -> LLMResult:
    return LLMResult(
        text=kept["text"],
        data=kept["data"],
        usage=Usage.from_dict(kept["usage"]),
        latency_ms=0.0,
        provider=kept["provider"],
        model=kept["model"],
        role=role,
        cost_usd=float(kept["cost_usd"]),
    )
