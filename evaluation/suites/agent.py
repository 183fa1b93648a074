"""The agent under test: a fresh conversation per case, with the skills in its system prompt and
the tools offered by native function calling (each vendor's own tool format; offline and replay
speak it too). Each sub-agent is one more tool, `delegate_to_<name>(task)`, which runs that agent
on the task in a conversation of its own and answers with its final response. Each tool call and
its result (a delegation with the sub-agent's own tool calls) is recorded in the transcript."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluation.providers import LLM, Message
from evaluation.providers.base import ToolCall
from evaluation.suites.offline import AgentRule
from evaluation.suites.subjects import SubAgent, Subject, Tool

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


TASK_SCHEMA = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the agent should do, with all it needs to know."}},
    "required": ["task"],
    "additionalProperties": False,
}


def _delegation_schema(sub: SubAgent) -> dict[str, Any]:
    return {
        "name": sub.tool_name,
        "description": f"Delegate a task to the {sub.name} agent: {sub.description}",
        "parameters": TASK_SCHEMA,
    }


def run_agent(
    llm: LLM,
    subject: Subject,
    prompt: str,
    system: str | None,
    *,
    llm_for: Callable[[Subject], LLM] | None = None,
) -> Transcript:
    """Drive one conversation to a final answer, running the tools the model calls (native function
    calling) and the sub-agents it delegates to (each with llm_for(its subject), by default the
    same LLM); raises ProviderError on LLM failure and TimeoutError when it never stops calling."""
    llm_for = llm_for or (lambda _: llm)
    transcript = Transcript(prompt=prompt, system=system_prompt(subject, system))
    messages = [Message("system", transcript.system), Message("user", prompt)]
    delegates = {sub.tool_name: sub for sub in subject.subagents}
    schemas = [t.schema() for t in subject.tools] + [_delegation_schema(sub) for sub in subject.subagents] or None
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
            if call.name in delegates:
                record = _delegate(delegates[call.name], call, llm_for)
            else:
                record = _run_tool(tools, call)
            transcript.tool_calls.append(record)
            messages.append(
                Message(
                    "tool", json.dumps(record.get("result", record.get("error")), default=str), tool_call_id=call.id
                )
            )
    raise TimeoutError(f"no final answer after {MAX_STEPS} tool-calling steps")


def _delegate(sub: SubAgent, call: ToolCall, llm_for: Callable[[Subject], LLM]) -> dict[str, Any]:
    """Run the sub-agent on the task in a conversation of its own; its failure is the tool's error."""
    record: dict[str, Any] = {"name": call.name, "arguments": call.arguments, "agent": sub.name}
    task = call.arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        record["error"] = "Invalid arguments: task: a non-empty string is required"
        return record
    try:
        inner = run_agent(llm_for(sub.subject), sub.subject, task, None, llm_for=llm_for)
    except Exception as exc:  # the sub-agent's failure is the parent's tool error, not a crash
        record["error"] = f"{type(exc).__name__}: {exc}"
        return record
    record["result"] = inner.response
    record["tool_calls"] = inner.tool_calls
    return record
