"""The offline provider: deterministic, seeded, no network, no key.

Each call carries its own rule (`Request.offline`), built by the caller from typed inputs: the
tutoring room's student, tutor and judge rules, the drift room's proposition judge, gate and
character, the suites room's agent and verdict judge. A call without a rule gets an echo.
"""

import hashlib
import json
import random

from evaluation.providers.base import Completion, Provider, Request, ToolCall, Usage

LABEL = "offline rule-based"


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
    takes_seed = True  # rng_for: the settings' seed and the request decide every answer

    def generate(self, request: Request) -> Completion:
        rule = request.offline or _echo
        answer = rule(request, rng_for(request))
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
