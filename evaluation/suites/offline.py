"""Rule-based stand-ins for the suite roles (offline provider): a smoke test with no key.

Rules the callers pass with their calls: AgentRule (suite_agent), VerdictRule (suite_judge) and
DraftRule (the skill author).

The agent calls the tool named in the prompt (or the first) with the prompt's numbers (as a
native tool call), then reports the result; without tools it restates the request. The judge passes a non-empty answer
that shares words with the rubric and says it is the offline rule-based judge.
"""

import random
import re
from dataclasses import dataclass
from typing import Any

from evaluation.providers.base import Request
from evaluation.text import content_words

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class AgentRule:
    """The agent's next step: call the tool the prompt names with its numbers, then report the result."""

    prompt: str
    skills: tuple[str, ...] = ()
    tool_results: tuple[dict[str, Any], ...] = ()

    def __call__(self, request: Request, rng: random.Random) -> str | dict[str, Any]:
        return offline_agent(request, self)


def offline_agent(request: Request, rule: AgentRule) -> str | dict[str, Any]:
    prompt = rule.prompt
    tools: list[dict[str, Any]] = request.tools or []
    if tools:
        done = list(rule.tool_results)
        if not done:
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
    skills = rule.skills
    lead = f"Following the {skills[0]} skill: " if skills else ""
    return f"{lead}you asked: {prompt.strip()}"


@dataclass(frozen=True)
class VerdictRule:
    """PASS a non-empty response that shares words with the rubric, and say it was the offline judge."""

    response: str
    rubric: str

    def __call__(self, request: Request, rng: random.Random) -> dict[str, Any]:
        return offline_judge(self.response, self.rubric)


def offline_judge(response: str, rubric: str) -> dict[str, Any]:
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


@dataclass(frozen=True)
class DraftRule:
    """A SKILL.md with one instruction per case: (prompt, expect) pairs."""

    cases: tuple[tuple[str, str], ...]

    def __call__(self, request: Request, rng: random.Random) -> str:
        return offline_draft(self.cases)


def offline_draft(cases: tuple[tuple[str, str], ...]) -> str:
    """A rule-based SKILL.md: one instruction per case, from its rubric."""
    lines = ["# Drafted skill", "", "Follow these instructions:", ""]
    lines += [f'- When the user writes something like "{prompt[:80]}": {expect}' for prompt, expect in cases]
    return "\n".join(lines)
