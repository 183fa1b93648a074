"""The offline provider: deterministic, seeded, no network, no key.

Each room registers a rule-based handler for the roles it owns (the tutoring room registers the
student, the reference tutor and the judge). A handler gets the Request (messages, directive,
structured context) and returns text, or a dict when the caller asked for JSON.
"""

import hashlib
import json
import random
from collections.abc import Callable
from typing import Any

from evaluation.providers.base import Completion, Provider, Request, ToolCall, Usage

Handler = Callable[[Request, random.Random], "str | dict[str, Any]"]
_HANDLERS: dict[str, Handler] = {}

LABEL = "offline rule-based"


def register(role: str) -> Callable[[Handler], Handler]:
    """Decorator: the rule-based handler for one role."""

    def wrap(fn: Handler) -> Handler:
        _HANDLERS[role] = fn
        return fn

    return wrap


def rng_for(request: Request) -> random.Random:
    """A generator seeded by the settings' seed and the request's content: same input, same output."""
    key = json.dumps(
        [request.settings.seed, request.role, [(m.role, m.content) for m in request.messages], request.directive],
        sort_keys=True,
    )
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def estimate_tokens(text: str) -> int:
    """Roughly 4 characters a token, as the vendors' tokenizers average on English."""
    return max(1, (len(text) + 3) // 4)


class OfflineProvider(Provider):
    name = "offline"
    default_model = "offline-rules-v1"

    def generate(self, request: Request) -> Completion:
        # A caller may name the rule-based handler (a character agent speaks through the tutor role).
        handler = _HANDLERS.get(request.context.get("offline_handler") or request.role, _echo)
        answer = handler(request, rng_for(request))
        if request.tools and isinstance(answer, dict) and "tool_calls" in answer:
            # A rule-based agent answers in the native shape: calls, or a final text.
            calls = [ToolCall(f"call_{i}", c["name"], c["arguments"]) for i, c in enumerate(answer["tool_calls"])]
            text = answer.get("final") or ""
            prompt = sum(estimate_tokens(m.content) for m in request.messages)
            return Completion(
                text=text,
                model=self.model,
                usage=Usage(prompt, estimate_tokens(text) + 10 * len(calls), 0, 1),
                tool_calls=calls,
            )
        data = answer if isinstance(answer, dict) else None
        text = json.dumps(answer) if isinstance(answer, dict) else answer
        prompt = sum(estimate_tokens(m.content) for m in request.messages)
        return Completion(text=text, data=data, model=self.model, usage=Usage(prompt, estimate_tokens(text), 0, 1))


def _echo(request: Request, rng: random.Random) -> str:
    last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    return f"(offline {request.role}) I read: {last[:200]}"
