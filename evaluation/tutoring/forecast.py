"""A simulated run's price before it starts: its prompts built as the run builds them (offline), sized, and priced."""

from dataclasses import replace
from typing import Any

from evaluation.errors import InvalidInput
from evaluation.providers import ProviderSpec, get_llm, resolve
from evaluation.providers.forecast import CallPlan, Forecast, estimate_tokens, forecast
from evaluation.providers.registry import settings_for
from evaluation.tutoring import judge, tutor
from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.start_input import approved_topic, start_agent, start_personas, start_problems
from evaluation.tutoring.values import PersonaSpec, TopicSpec

TYPICAL_TUTOR_REPLY = 120
"""Tokens of a typical tutor reply (a short explanation and a question; the reference tutor's JSON around it)."""
TYPICAL_JUDGE_REPLY = 1_500
"""Tokens of a typical judgement: five scores with their analyses, a summary and up to five problems."""
DIRECTIVE_TOKENS = 30
"""The simulator's turn directive, placed in its messages each turn."""
MESSAGE_OVERHEAD = 4
"""Tokens a vendor counts per message besides its text (role and separators)."""


def _student_reply(persona: PersonaSpec) -> int:
    # The persona's word budget, at about 1.3 tokens a word, is what the simulator is asked to keep under.
    return max(1, round(persona.response_style.max_words * 1.3))


def _conversation(turns: int, student: int, tutor_reply: int) -> list[int]:
    """Tokens of the conversation each turn's calls carry: before turn t, t-1 exchanges."""
    return [(t - 1) * (student + tutor_reply + 2 * MESSAGE_OVERHEAD) for t in range(1, turns + 1)]


def _transcript(turns: int, student: int, tutor_reply: int) -> list[dict[str, Any]]:
    words = [
        {"turn": t, "role": role, "content": "word " * max(1, size * 4 // 5)}
        for t in range(1, turns + 1)
        for role, size in (("student", student), ("tutor", tutor_reply))
    ]
    return words


def tutoring_forecast(
    *,
    topic: TopicSpec,
    personas: list[PersonaSpec],
    runs_per_persona: int = 1,
    max_turns: int = 20,
    provider: str | None = None,
    tutor_spec: ProviderSpec | None = None,
    tutor_prompt: str | None = None,
    external_tutor: str = "",
) -> Forecast:
    """Calls, tokens and price of simulating and judging runs_per_persona runs per persona, each of max_turns
    turns: per turn a simulator and a tutor call, then one judge call. Low: typical replies; high: every reply
    at its role's max_tokens (and the judge's thinking budget where the vendor adds it). Nothing is sent.

    tutor_spec/tutor_prompt: the tutor this app calls and pays for (the reference tutor's role, or an agent
    reached as an OpenAI-compatible chat endpoint); external_tutor names a protocol server it does not pay for.
    """
    specs = {role: resolve(role, provider) for role in ("simulator", "judge")}
    tutor_spec = tutor_spec or (None if external_tutor else resolve("tutor", provider))
    topic_state = tutor.initial_state(topic.as_dict(), "forecast", seed=0)
    tutor_system = estimate_tokens(tutor_prompt if tutor_prompt is not None else tutor.system_prompt(topic_state))
    judge_system = estimate_tokens(judge.system_prompt())
    limits = {role: settings_for(role, spec) for role, spec in specs.items()}
    tutor_max = settings_for("tutor", tutor_spec).max_tokens if tutor_spec else TYPICAL_TUTOR_REPLY
    judge_settings = limits["judge"]
    judge_max = judge_settings.max_tokens + (
        judge_settings.thinking_budget or 0 if specs["judge"].provider.startswith("anthropic") else 0
    )
    offline_llm = get_llm("simulator", override="offline")
    totals = {key: [0, 0] for key in ("sim_in", "sim_out", "tutor_in", "tutor_out", "judge_in", "judge_out")}
    for persona in personas:
        sim_system = estimate_tokens(StudentSimulator(persona, topic, offline_llm, seed=0).system_prompt())
        student_typical = min(_student_reply(persona), limits["simulator"].max_tokens)
        for i, (student, tutor_reply, judged) in enumerate(
            (
                (student_typical, min(TYPICAL_TUTOR_REPLY, tutor_max), TYPICAL_JUDGE_REPLY),
                (limits["simulator"].max_tokens, tutor_max, judge_max),
            )
        ):
            carried = _conversation(max_turns, student, tutor_reply)
            sim_in = sum(sim_system + c + tutor_reply + DIRECTIVE_TOKENS + 2 * MESSAGE_OVERHEAD for c in carried)
            tutor_in = sum(tutor_system + c + student + 2 * MESSAGE_OVERHEAD for c in carried)
            judge_in = judge_system + estimate_tokens(
                judge.build_user_message(_transcript(max_turns, student, tutor_reply), persona, topic)
            )
            for key, value in (
                ("sim_in", sim_in),
                ("sim_out", student * max_turns),
                ("tutor_in", tutor_in),
                ("tutor_out", tutor_reply * max_turns),
                ("judge_in", judge_in),
                ("judge_out", judged),
            ):
                totals[key][i] += value * runs_per_persona
    runs = len(personas) * runs_per_persona
    calls = runs * max_turns

    def plan(role: str, spec: ProviderSpec, n: int, key: str) -> CallPlan:
        return CallPlan(role, spec, n, *totals[f"{key}_in"], *totals[f"{key}_out"])

    plans = [plan("simulator", specs["simulator"], calls, "sim")]
    if tutor_spec is not None:
        plans.append(plan("tutor", tutor_spec, calls, "tutor"))
    plans.append(plan("judge", specs["judge"], runs, "judge"))
    notes = [
        f"{runs} run{'s' if runs != 1 else ''} of up to {max_turns} turns: a simulator and a tutor call a turn, "
        "then one judge call a run (a reply that is not valid JSON costs one repair call more).",
        "Low: typical replies; high: every reply at its max_tokens. Prompt caching lowers the input's price; "
        "a conversation that ends early costs less.",
    ]
    if external_tutor:
        notes.append(f"The tutor under test ({external_tutor}) runs elsewhere: its calls are not counted here.")
    return forecast(plans, notes)


def run_forecast(
    *,
    topic_id: str,
    persona: str | list[str] = "average_student",
    max_turns: int = 20,
    runs_per_persona: int = 1,
    agent_id: str | None = None,
    provider: str | None = None,
    grade: int | None = None,
) -> Forecast:
    """What run_start with these arguments would take and cost; it creates no run and sends nothing.
    Bad input is refused as run_start refuses it (InvalidInput naming the field, NotFound)."""
    problems = start_problems(max_turns=max_turns, runs_per_persona=runs_per_persona, grade=grade, provider=provider)
    if problems:
        raise InvalidInput(problems)
    topic = approved_topic(topic_id)
    agent = start_agent(agent_id, store=False)
    records = start_personas(persona)
    tutor_spec, tutor_prompt, external = None, None, ""
    if agent is not None:
        if agent.kind == "openai_chat":
            tutor_spec = ProviderSpec("openai", agent.model, agent.base_url, {"api": "chat"})
            tutor_prompt = agent.system_prompt
        elif agent.kind == "protocol":
            external = f"agent {agent.pk}"
    personas = [replace(spec, grade=grade) if grade else spec for spec in (PersonaSpec.from_record(p) for p in records)]
    return tutoring_forecast(
        topic=TopicSpec.from_record(topic),
        personas=personas,
        runs_per_persona=runs_per_persona,
        max_turns=max_turns,
        provider=provider,
        tutor_spec=tutor_spec,
        tutor_prompt=tutor_prompt,
        external_tutor=external,
    )
