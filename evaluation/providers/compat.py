"""What OpenAI-compatible servers (llama.cpp's llama-server, llama-cpp-python, Ollama, vLLM) differ in,
learned per endpoint or configured in the role's options, so the chat-completions path works with each
as it is:

- how a JSON reply is asked for: `response_format` {"type": "json_schema", "json_schema": ...} (OpenAI,
  llama-server, vLLM), {"type": "json_object", "schema": ...} (llama-cpp-python's server, which answers
  the first with a 500), or no `response_format` and the schema in the prompt;
- whether the roles must alternate user/assistant starting with the user (strict chat templates such as
  Gemma's refuse a system message after the first, an assistant message first, two user messages in a row);
- how fast the server generates, so a call's timeout covers the tokens it may produce.

Options (an LLM config's options, or a spec's): {"json_mode": "json_schema" | "json_object" | "prompt"}
fixes the first; {"alternate_roles": true} the second; {"tokens_per_second": N} gives the speed before
any call has measured it."""

import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

JSON_MODES = ("json_schema", "json_object", "prompt")

SCHEMA_INSTRUCTION = (
    "Reply with one JSON object and nothing else. It must match this JSON schema:\n```json\n{schema}\n```"
)


def schema_instruction(schema: dict[str, Any]) -> str:
    """The system message that asks for JSON where the server is not told the schema."""
    return SCHEMA_INSTRUCTION.format(schema=json.dumps(schema))


def response_format(mode: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The `response_format` of a chat request asking for JSON under `schema` in this mode (None: prompt only)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "result", "schema": schema, "strict": False}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar", "format")


def refuses_format(status: int, message: str) -> bool:
    """Whether a server's error may be its refusal of the way JSON was asked for: a 400, 422 or 500 whose
    message names it (llama-cpp-python's server answers json_schema with a 500 naming the schema). Other
    errors (a wrong model, an overloaded server) are not taken for one."""
    text = message.lower()
    return status in (400, 422, 500) and any(word in text for word in FORMAT_WORDS)


def refuses_roles(message: str) -> bool:
    """Whether a server's error says its chat template wants alternating roles (Gemma's and Mistral's say
    "Conversation roles must alternate user/assistant/user/assistant/...")."""
    text = message.lower()
    return "alternate" in text and "role" in text


def alternating(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same conversation as one optional system message followed by user and assistant messages that
    alternate, starting with the user: leading system messages join into the first; a later system
    message (a turn directive) joins the user message nearest before it (after it when none is before);
    consecutive messages of one role join; an assistant opening gets a user message before it. Tool calls
    and their results are left as they are (servers whose templates take tools take them in any order)."""
    system: list[str] = []
    rest = list(messages)
    while rest and rest[0].get("role") == "system":
        system.append(str(rest.pop(0).get("content") or ""))
    out: list[dict[str, Any]] = []
    carried: list[str] = []  # system text waiting for a user message
    for m in rest:
        role = m.get("role")
        if role == "system":
            last_user = next((x for x in reversed(out) if x["role"] == "user"), None)
            if last_user is not None and out[-1] is last_user:
                last_user["content"] = f"{last_user['content']}\n\n{m.get('content') or ''}"
            else:
                carried.append(str(m.get("content") or ""))
            continue
        if role not in ("user", "assistant") or m.get("tool_calls"):
            out.append(dict(m))
            continue
        content = str(m.get("content") or "")
        if role == "user" and carried:
            content = "\n\n".join([*carried, content])
            carried = []
        if out and out[-1]["role"] == role and not out[-1].get("tool_calls"):
            out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n\n{content}"}
        elif not out and role == "assistant":
            out += [{"role": "user", "content": "\n\n".join(carried) or "(The conversation begins.)"}, dict(m)]
            carried = []
        else:
            out.append({**m, "content": content})
    if carried:
        if out and out[-1]["role"] == "user":
            out[-1] = {**out[-1], "content": "\n\n".join([out[-1]["content"], *carried])}
        else:
            out.append({"role": "user", "content": "\n\n".join(carried)})
    head = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    return head + out


@dataclass
class Speed:
    """An endpoint's measured speed: output tokens a second, and prompt tokens a second when the server says."""

    output: float
    prompt: float | None = None


class EndpointTraits:
    """What one endpoint was found (or configured) to take; shared by every call to it, thread-safe."""

    MIN_MEASURED_TOKENS = 32
    """A reply shorter than this says too little about the speed to be measured."""

    def __init__(self, options: dict[str, Any]):
        self._lock = threading.Lock()
        mode = options.get("json_mode")
        if mode is not None and mode not in JSON_MODES:
            raise ValueError(f"options json_mode {mode!r}: choose from {', '.join(JSON_MODES)}")
        self.json_mode_fixed = mode is not None
        self.json_mode: str = mode or "json_schema"
        self.alternate_roles: bool = bool(options.get("alternate_roles", False))
        tps = options.get("tokens_per_second")
        self.speed: Speed | None = Speed(float(tps)) if tps else None
        self.speed_configured = tps is not None

    def following_mode(self, mode: str) -> str | None:
        """The way of asking for JSON to try after the server refused `mode` (None: none is left, or the
        mode was configured)."""
        if self.json_mode_fixed or mode not in JSON_MODES:
            return None
        following = JSON_MODES[JSON_MODES.index(mode) + 1 :]
        return following[0] if following else None

    def learned(self, mode: str, alternate: bool) -> None:
        """A call in this mode (and order of roles) was answered: later calls start from it."""
        with self._lock:
            self.json_mode = mode
            self.alternate_roles = self.alternate_roles or alternate

    def observe(self, reply: dict[str, Any], elapsed: float) -> None:
        """Learn the speed from a reply: the server's own timings (llama-server's `timings`) or its token
        count over the call's time."""
        if self.speed_configured:
            return
        found = reply.get("timings")
        timings: dict[str, Any] = found if isinstance(found, dict) else {}
        output = _positive(timings.get("predicted_per_second"))
        prompt = _positive(timings.get("prompt_per_second"))
        if output is None:
            tokens = (reply.get("usage") or {}).get("completion_tokens") or 0
            if tokens < self.MIN_MEASURED_TOKENS or elapsed <= 0:
                return
            output = tokens / elapsed
        with self._lock:
            old = self.speed
            # The slowest seen (with a little of each new reading): a timeout sized on a fast moment fails a slow one.
            self.speed = Speed(
                output if old is None else min(output, 0.5 * (old.output + output)),
                prompt if old is None or old.prompt is None or prompt is None else min(prompt, old.prompt),
            )

    def seconds_needed(self, prompt_tokens: int, max_tokens: int) -> float | None:
        """How long a call may take at the measured speed, twice over (None: speed not known). A fast server's
        is below any configured timeout, which then holds."""
        speed = self.speed
        if speed is None:
            return None
        reading = prompt_tokens / speed.prompt if speed.prompt else prompt_tokens / (4 * speed.output)
        return 2.0 * (reading + max_tokens / speed.output)


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
LOCAL_NAME = "local"


def endpoint_name(base_url: str, options: dict[str, Any]) -> str:
    """The name an endpoint goes by in a judge's identity, stable across restarts: the options'
    {"endpoint_name": ...} when given; "local" for a server on this machine (whose port changes from one
    start to the next); else the base URL itself, as identities made before these names were."""
    named = str(options.get("endpoint_name") or "").strip()
    if named:
        return named
    if not base_url:
        return ""
    host = (urlsplit(base_url).hostname or "").lower()
    return LOCAL_NAME if host in LOCAL_HOSTS else base_url


PLUMBING_ONLY_MODELS = ("gemma-3-270m",)
"""Models run to check the plumbing, never to measure quality: Gemma 3 270M's base checkpoint does not
follow instructions, and as a judge it agreed with people at chance (quadratic kappa -0.12 to 0.04 on 20
items)."""

PLUMBING_ONLY_NOTE = (
    "Scores from {model} check the plumbing only: it is a small base model that does not follow instructions "
    "(as a judge it agreed with people at chance), so they are no measurement of quality."
)


def plumbing_only(label: str) -> str:
    """The note to show beside scores whose judge or agent label names a plumbing-only model ("" otherwise)."""
    low = (label or "").lower()
    model = next((m for m in PLUMBING_ONLY_MODELS if m in low), None)
    return PLUMBING_ONLY_NOTE.format(model=model) if model else ""
