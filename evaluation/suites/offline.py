"""Rule-based stand-ins for the suite roles (offline provider): a smoke test with no key.

The agent calls the tool named in the prompt (or the first) with the prompt's numbers (as a
native tool call), then reports the result; without tools it restates the request. The judge passes a non-empty answer
that shares words with the rubric and says it is the offline rule-based judge.
"""

import random
import re
from typing import Any

from evaluation.providers.base import Request
from evaluation.providers.offline import register
from evaluation.text import content_words

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@register("suite_agent")
def offline_agent(request: Request, rng: random.Random) -> str | dict[str, Any]:
    ctx = request.context
    if ctx.get("draft"):
        return offline_draft(ctx.get("cases") or [])
    prompt: str = ctx.get("prompt", "")
    tools: list[dict[str, Any]] = ctx.get("tools") or []
    if request.tools:
        done = ctx.get("tool_results") or []
        if tools and not done:
            tool = next((t for t in tools if t["name"].lower() in prompt.lower()), tools[0])
            numbers = [float(n) if "." in n else int(n) for n in _NUMBER.findall(prompt)]
            arguments: dict[str, Any] = {}
            for name, spec in tool["parameters"]["properties"].items():
                if spec.get("type") in ("integer", "number") and numbers:
                    arguments[name] = numbers.pop(0)
                else:
                    arguments[name] = prompt
            return {"tool_calls": [{"name": tool["name"], "arguments": arguments}], "final": None}
        last = done[-1] if done else {}
        answer = last.get("result", last.get("error", "no result"))
        return {"tool_calls": [], "final": f"The answer is {answer}."}
    skills = ctx.get("skills") or []
    lead = f"Following the {skills[0]} skill: " if skills else ""
    return f"{lead}you asked: {prompt.strip()}"


@register("suite_judge")
def offline_judge(request: Request, rng: random.Random) -> dict[str, Any]:
    transcript = request.context.get("transcript") or {}
    rubric = request.context.get("rubric", "")
    response = transcript.get("response", "")
    shared = content_words(response) & content_words(rubric)
    if not response.strip():
        return {"verdict": "FAIL", "reason": "[offline rule-based judge] the response is empty", "warning": None}
    if not shared:
        return {
            "verdict": "FAIL",
            "reason": "[offline rule-based judge] the response shares no words with the rubric",
            "warning": None,
        }
    return {
        "verdict": "PASS",
        "reason": f"[offline rule-based judge] the response mentions {', '.join(sorted(shared)[:5])}",
        "warning": "offline rule-based verdict: set a provider for an LLM judge",
    }


def offline_draft(cases: list[dict[str, str]]) -> str:
    """A rule-based SKILL.md: one instruction per case, from its rubric."""
    lines = ["# Drafted skill", "", "Follow these instructions:", ""]
    lines += [f'- When the user writes something like "{c["prompt"][:80]}": {c["expect"]}' for c in cases]
    return "\n".join(lines)
