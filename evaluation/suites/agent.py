"""The agent under test: a fresh conversation per case, with the skills in its system prompt and
the tools offered by native function calling (each vendor's own tool format; offline and replay
speak it too). Each tool call and its result is recorded in the transcript."""

import json
from dataclasses import dataclass, field
from typing import Any

from evaluation.providers import LLM, Message
from evaluation.providers.base import ToolCall
from evaluation.suites.offline import AgentRule
from evaluation.suites.subjects import Subject, Tool

MAX_STEPS = 8


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
    return "\n\n".join(parts)


def _run_tool(tools: dict[str, Tool], call: ToolCall) -> dict[str, Any]:
    record: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
    tool = tools.get(call.name)
    if tool is None:
        record["error"] = f"no tool named {call.name!r}"
        return record
    try:
        record["result"] = tool.call(call.arguments)
    except Exception as exc:  # a tool's failure is part of the transcript, not a crash
        record["error"] = f"{type(exc).__name__}: {exc}"
    return record


def run_agent(llm: LLM, subject: Subject, prompt: str, system: str | None) -> Transcript:
    """Drive one conversation to a final answer, running the tools the model calls (native function
    calling); raises ProviderError on LLM failure and TimeoutError when it never stops calling."""
    transcript = Transcript(prompt=prompt, system=system_prompt(subject, system))
    messages = [Message("system", transcript.system), Message("user", prompt)]
    schemas = [t.schema() for t in subject.tools] or None
    tools = {t.name: t for t in subject.tools}
    skills = tuple(name for name, _ in subject.skills)
    for _ in range(MAX_STEPS):
        rule = AgentRule(prompt=prompt, skills=skills, tool_results=tuple(transcript.tool_calls))
        result = llm.call(messages, tools=schemas, offline=rule)
        if not result.tool_calls:
            transcript.response = result.text.strip()
            return transcript
        messages.append(Message("assistant", result.text, tool_calls=tuple(result.tool_calls)))
        for call in result.tool_calls:
            record = _run_tool(tools, call)
            transcript.tool_calls.append(record)
            messages.append(
                Message(
                    "tool", json.dumps(record.get("result", record.get("error")), default=str), tool_call_id=call.id
                )
            )
    raise TimeoutError(f"no final answer after {MAX_STEPS} tool-calling steps")
