"""Our own character agents: they talk in channels through the tutor role with their persona spec,
with the runtime corrections applied in-process. Synthetic mode generates a conversation."""

from django.utils import timezone

from evaluation.drift.corrections import gate_llm, gated_message, pre_invocation
from evaluation.drift.offline import CharacterRule
from evaluation.models import Agent, AgentMessage, EvaluationRun
from evaluation.providers import Message, ProviderSpec, get_llm

DEFAULT_SETTING = "the other people in this channel"


def system_prompt(agent: Agent, guidance: dict) -> str:
    """The character's prompt; who it talks with comes from its cast file's `setting`."""
    setting = (agent.extra or {}).get("setting") or DEFAULT_SETTING
    parts = [
        f"You are {agent.display_name}. {agent.persona_spec}",
        f"You are chatting with {setting}. Write one short chat message, in character.",
    ]
    if guidance.get("nudge"):
        parts.append(guidance["nudge"])
    if guidance.get("recent_messages"):
        parts.append(
            "Your recent messages, which repeat themselves:\n"
            + "\n".join(f"- {m}" for m in guidance["recent_messages"])
        )
    if guidance.get("avoid_phrases"):
        parts.append("Avoid these phrases you have used a lot lately: " + "; ".join(guidance["avoid_phrases"]))
    return "\n\n".join(parts)


def character_say(
    agent: Agent,
    channel: str,
    *,
    provider: str | ProviderSpec | None = None,
    source: str = "generated",
    run: EvaluationRun | None = None,
) -> AgentMessage:
    recent = list(AgentMessage.objects.filter(channel=channel).select_related("agent").order_by("-created_at")[:12])[
        ::-1
    ]
    guidance = pre_invocation(agent, channel, run)
    llm = get_llm("tutor", override=provider)
    history = [Message("system", system_prompt(agent, guidance))]
    history += [
        Message("assistant" if m.agent_id == agent.pk else "user", f"{m.agent.display_name}: {m.text}") for m in recent
    ]
    if len(history) == 1 or history[-1].role != "user":
        history.append(Message("user", f"(Your turn to speak in #{channel}.)"))
    rule = CharacterRule(
        name=agent.display_name,
        sample_lines=tuple((agent.extra or {}).get("sample_lines") or ()),
        description=agent.persona_spec,
        turn=len(recent),
        avoid_phrases=tuple(guidance.get("avoid_phrases") or ()),
    )

    def generate(feedback: str | None) -> str:
        messages = history + ([Message("user", feedback)] if feedback else [])
        return llm.call(messages, offline=rule).text.strip()

    text, _ = gated_message(agent, channel, generate, llm=gate_llm(provider), run=run)
    return AgentMessage.objects.create(
        agent=agent, channel=channel, text=text, created_at=timezone.now(), source=source
    )


def synthesize_conversation(
    agents: list[Agent], channel: str, *, rounds: int = 4, provider: str | ProviderSpec | None = None
) -> list[AgentMessage]:
    """Round-robin messages from each agent in a fresh channel (synthetic mode)."""
    return [
        character_say(agent, channel, provider=provider, source="synthetic") for _ in range(rounds) for agent in agents
    ]
