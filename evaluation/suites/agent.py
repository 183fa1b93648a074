"""The agent under test: a fresh conversation per case, with the skills in its system prompt and
the tools offered through a JSON tool-calling protocol that every provider (offline and replay
included) can follow. Each tool call and its result is recorded in the transcript."""

import json
from dataclasses import dataclass, field
from typing import Any

from evaluation.providers import LLM, Message
from evaluation.suites.subjects import Subject

MAX_STEPS = 8

AGENT_SCHEMA = {
    "type": "object",
    "required": ["tool_calls", "final"],
    "properties": {
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "arguments"],
                "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            },
        },
        "final": {"type": ["string", "null"]},
    },
}


@dataclass
class Transcript:
    prompt: str
    system: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    response: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "system": self.system, "tool_calls": self.tool_calls, "response": self.response}


def system_prompt(subject: Subject, system: str | None) -> str:
    parts = [system or "You are a helpful assistant."]
    if subject.identity:
        parts.append(subject.identity.strip())
    for name, text in subject.skills:
        parts.append(f"## Skill: {name}\n{text.strip()}")
    if subject.tools:
        listing = json.dumps([t.schema() for t in subject.tools], indent=1)
        parts.append(
            "You can call these tools:\n"
            f"{listing}\n"
            'Reply with JSON: {"tool_calls": [{"name": ..., "arguments": {...}}], "final": null} to call tools, '
            'then, once you have their results, {"tool_calls": [], "final": "your answer to the user"}.'
        )
    return "\n\n".join(parts)


def run_agent(llm: LLM, subject: Subject, prompt: str, system: str | None) -> Transcript:
    """Drive one conversation to a final answer; raises ProviderError on LLM failure."""
    transcript = Transcript(prompt=prompt, system=system_prompt(subject, system))
    messages = [Message("system", transcript.system), Message("user", prompt)]
    context = {
        "tools": [t.schema() for t in subject.tools],
        "skills": [name for name, _ in subject.skills],
        "prompt": prompt,
    }
    if not subject.tools:
        transcript.response = llm.call(messages, context=context).text.strip()
        return transcript
    tools = {t.name: t for t in subject.tools}
    for _ in range(MAX_STEPS):
        data = llm.call(messages, schema=AGENT_SCHEMA, context={**context, "tool_results": transcript.tool_calls}).data
        if not data["tool_calls"]:
            transcript.response = (data.get("final") or "").strip()
            return transcript
        results = []
        for call in data["tool_calls"]:
            record: dict[str, Any] = {"name": call["name"], "arguments": call["arguments"]}
            tool = tools.get(call["name"])
            if tool is None:
                record["error"] = f"no tool named {call['name']!r}"
            else:
                try:
                    record["result"] = tool.fn(**call["arguments"])
                except Exception as exc:  # a tool's failure is part of the transcript, not a crash
                    record["error"] = f"{type(exc).__name__}: {exc}"
            transcript.tool_calls.append(record)
            results.append(record)
        messages += [
            Message("assistant", json.dumps(data)),
            Message("user", "Tool results: " + json.dumps(results, default=str)),
        ]
    transcript.response = ""
    raise TimeoutError(f"no final answer after {MAX_STEPS} tool-calling steps")
