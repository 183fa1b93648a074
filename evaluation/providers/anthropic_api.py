"""Anthropic: the Messages API with streaming and extended thinking; `anthropic-haiku` is a cheap preset."""

import json
import warnings
from typing import Any

import anthropic
from anthropic.types.message_create_params import MessageCreateParamsBase

from evaluation.providers.base import (
    Completion,
    Message,
    NoReplyError,
    Provider,
    Request,
    RetryableError,
    ToolCall,
    Usage,
    error_message,
    parse_retry_after,
    schema_instruction,
    status_error,
)
from evaluation.providers.capabilities import terms_for

EPHEMERAL = {"type": "ephemeral"}
"""Anthropic's prompt-cache breakpoint: the prompt up to the block carrying it is cached for 5 minutes."""
BATCH_TTL = "1h"
"""A batch line's breakpoints ask for the 1-hour cache: a batch may take longer than 5 minutes to run, and
its lines share the rubric's prefix (the vendor's advice for batches)."""
LONG_CONVERSATION = 4
"""From this many turns on, the turns before the newest are cached too (a simulator's or tutor's history)."""


class AnthropicProvider(Provider):
    name = "anthropic"
    default_model = "claude-opus-4-6"
    key_env = "ANTHROPIC_API_KEY"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        # Always an explicit key: the SDK would otherwise read ANTHROPIC_API_KEY itself, whatever the URL.
        self.client = anthropic.Anthropic(api_key=self.api_key or "none", base_url=self.base_url or None, max_retries=0)

    def place_directive(self, messages: list[Message], directive: str) -> list[Message]:
        """Claude follows a directive best at the end of the last user turn."""
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].role == "user":
                last = messages[index]
                return [*messages[:index], Message("user", f"{last.content}\n\n{directive}"), *messages[index + 1 :]]
        return [*messages, Message("user", directive)]

    def generate(self, request: Request) -> Completion:
        params = message_params(request, cache=self.options.get("prompt_cache", True) is not False)
        try:
            with warnings.catch_warnings():
                # We ask for a fixed thinking budget on purpose (a reproducible cost per judgement).
                warnings.filterwarnings("ignore", message=".*thinking.type=enabled.*")
                with self.client.messages.stream(**params, timeout=request.timeout) as stream:
                    message = stream.get_final_message()
                    headers = stream.response.headers
        except anthropic.APIStatusError as exc:
            raise status_error(
                self.name, exc.status_code, error_message(exc), parse_retry_after(exc.response.headers), self.key_hint
            ) from exc
        except anthropic.APITimeoutError as exc:
            raise NoReplyError(f"{self.name}: no reply within {request.timeout:g}s") from exc
        except anthropic.APIConnectionError as exc:
            raise RetryableError(f"{self.name}: connection failed ({exc.__cause__ or exc})") from exc
        except (anthropic.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise RetryableError(f"{self.name}: malformed stream ({exc})") from exc
        if message.stop_reason is None:
            raise RetryableError(f"{self.name}: the stream ended before message_stop (truncated reply)")
        text = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
        thinking = "".join(getattr(block, "thinking", "") for block in message.content if block.type == "thinking")
        usage = message.usage
        read = getattr(usage, "cache_read_input_tokens", 0) or 0
        written = getattr(usage, "cache_creation_input_tokens", 0) or 0
        written_long = long_cache_writes(usage)
        calls = [
            ToolCall(block.id, block.name, dict(block.input or {}))
            for block in message.content
            if block.type == "tool_use"
        ]  # type: ignore[union-attr]
        return Completion(
            tool_calls=calls,
            text=text,
            usage=Usage(
                # Our input_tokens counts every prompt token; Anthropic reports the cached parts apart.
                input_tokens=(usage.input_tokens or 0) + read + written,
                cached_input_tokens=read,
                cache_write_tokens=written,
                cache_write_long_tokens=written_long,
                output_tokens=usage.output_tokens or 0,
                # The API bills thinking as output and does not report it apart; estimate it from its text.
                thinking_tokens=len(thinking) // 4,
                calls=1,
            ),
            model=message.model or request.model,
            headers=headers,
        )


class AnthropicHaikuProvider(AnthropicProvider):
    name = "anthropic-haiku"
    default_model = "claude-haiku-4-5"


def long_cache_writes(usage: Any) -> int:
    """Of the tokens a call wrote to the cache, those written for 1 hour (usage.cache_creation's split;
    an answer without it wrote none for long)."""
    split = getattr(usage, "cache_creation", None)
    if isinstance(split, dict):
        return int(split.get("ephemeral_1h_input_tokens") or 0)
    return int(getattr(split, "ephemeral_1h_input_tokens", 0) or 0)


def message_params(request: Request, *, cache: bool, ttl: str = "") -> MessageCreateParamsBase:
    """The Messages API's parameters for a request (a direct call's and a batch line's alike), without
    stream or timeout, as the installed SDK's MessageCreateParams types them: a setting the model does
    not take (capabilities.terms_for) is not sent. With cache, breakpoints end the stable prefix: the
    system prompt, the tools and a long conversation's history (3 of the 4 a request may set); ttl "1h"
    asks for the 1-hour cache where the SDK's type offers it (batch lines)."""
    s = request.settings
    terms = terms_for("anthropic", request.model)
    marker: dict[str, Any] = dict(EPHEMERAL)
    if ttl and ttl in terms.cache_ttls and ttl != "5m":
        marker["ttl"] = ttl
    system = [m.content for m in request.messages if m.role == "system" and m.content.strip()]
    if request.schema is not None:
        system.append(schema_instruction(request.schema))
    turns = _anthropic_turns(request.messages) or [{"role": "user", "content": "(begin)"}]
    thinking = s.thinking_budget if terms.thinking_budget else None
    params: MessageCreateParamsBase = {
        "model": request.model,
        "max_tokens": s.max_tokens + (thinking or 0),
        "messages": _mark_conversation(turns, marker) if cache else turns,  # type: ignore[typeddict-item]
    }
    if system:
        # One text block per system message, stable first: the last one ends the cached prefix.
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text.strip()} for text in system]
        if cache:
            blocks[-1]["cache_control"] = dict(marker)
        params["system"] = blocks  # type: ignore[typeddict-item]
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in request.tools
        ]
        if cache:
            tools[-1]["cache_control"] = dict(marker)
        params["tools"] = tools  # type: ignore[typeddict-item]
    if thinking:
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    # A temperature only where the SDK's type (the API version) and the model take one.
    if s.temperature is not None and terms.takes("temperature", reasoning=bool(thinking)):
        params["temperature"] = s.temperature  # type: ignore[typeddict-unknown-key]  # an older SDK's field
    return params


def _mark_conversation(turns: list[dict[str, Any]], marker: dict[str, Any]) -> list[dict[str, Any]]:
    """A long conversation gets a cache breakpoint on the turn before the newest, so the next call of
    the same role reads the history from the cache (system, tools and this make 3 of the 4 allowed)."""
    if len(turns) < LONG_CONVERSATION:
        return turns
    marked = list(turns)
    before = dict(marked[-2])
    content = before["content"]
    if isinstance(content, str):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    else:
        blocks = [dict(block) for block in content]
    if not blocks:
        return turns
    blocks[-1]["cache_control"] = dict(marker)
    before["content"] = blocks
    marked[-2] = before
    return marked


def _anthropic_turns(messages: list[Message]) -> list[dict[str, Any]]:
    """Tool calls become tool_use blocks; tool results become tool_result blocks in a user turn."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
        elif m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
            turns.append({"role": "assistant", "content": blocks})
        else:
            turns.append({"role": m.role, "content": m.content})
    return turns
