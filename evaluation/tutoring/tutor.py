"""The built-in reference tutor: a grounded LLM tutor that works through a topic's problems.

It keeps its place in the session state (problem index, attempts); the LLM is told the current
problem and its answer and replies with JSON saying what it wrote and whether to move on.
"""

from typing import Any

from evaluation.providers import LLM, LLMResult, Message
from evaluation.tutoring.exercises import exercises_for
from evaluation.tutoring.llm_records import add_usage, llm_record
from evaluation.tutoring.offline import TutorRule

TUTOR_SCHEMA = {
    "type": "object",
    "required": ["reply", "student_correct", "move_on"],
    "properties": {
        "reply": {"type": "string", "minLength": 1},
        "student_correct": {"type": "boolean"},
        "move_on": {"type": "boolean"},
    },
}
MAX_ATTEMPTS = 2
FAULTS = {
    "gives_answer_away": "after a wrong answer it states the answer at once and moves on, without a hint or asking "
    "how the student reasoned",
    "ignores_last_message": "it does not read the student's last message: its reply is the same whatever the "
    "student said (so it never hears a right answer, a question or a worry)",
}
"""Faults a tutor session can be started with (the degraded tutor's): real tutors' failings, made on purpose so
that a gate's power can be measured against a known weaker tutor. The judges know nothing of them."""


def initial_state(
    topic: dict[str, Any],
    session_id: str,
    problem_count: int = 8,
    *,
    seed: int | None = None,
    faults: tuple[str, ...] | list[str] = (),
) -> dict[str, Any]:
    """A new session's state. With a seed (a simulated run's), the exercises and every tutor call are
    seeded from it, so the same seed replays the same session; without one, the session id seeds them.
    faults: names from FAULTS the tutor shows in this session (none for the reference tutor)."""
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        raise ValueError(f"faults: unknown {', '.join(unknown)} (known: {', '.join(FAULTS)})")
    return {
        **({"faults": sorted(faults)} if faults else {}),
        "topic": topic,
        "problems": [
            p.as_dict()
            for p in exercises_for(topic["topic_id"], session_id if seed is None else f"seed:{seed}", problem_count)
        ],
        "index": 0,
        "attempts": 0,
        "turn": 0,
        "seed": seed,
    }


def turn_seed(state: dict[str, Any]) -> int | None:
    """The seed of this tutor call: derived from the session's seed and the turn (None when unseeded)."""
    seed = state.get("seed")
    return None if seed is None else int(seed) * 1000 + int(state["turn"])


def system_prompt(state: dict[str, Any]) -> str:
    topic = state["topic"]
    faulty = (
        ["When the student is wrong, state the correct answer straight away and move on to the next problem."]
        if "gives_answer_away" in state.get("faults", ())
        else []
    )
    return "\n".join(
        [
            f"You are a warm, patient maths tutor teaching a grade {topic['grade']} student: {topic['name']}.",
            "Learning objectives: " + "; ".join(topic.get("learning_objectives") or []),
            "Watch for these misconceptions: " + "; ".join(topic.get("common_misconceptions") or []),
            "Work through one problem at a time. Keep replies short, adapt to the student's mood and pace, and vary "
            "your wording. When the student is wrong, find the misconception rather than just giving the answer.",
            'Reply with JSON: {"reply": what you say, "student_correct": bool, "move_on": bool}. Move on when the '
            f"student is right or has tried {MAX_ATTEMPTS} times; when moving on, end your reply with the next problem.",
            *faulty,
        ]
    )


def _account(state: dict[str, Any], llm: LLM, result: LLMResult) -> None:
    """Keep, in the session state, which model tutors and the tokens it has used (runs report both)."""
    record = {**llm_record(llm, state.get("seed")), "usage": (state.get("tutor") or {}).get("usage") or {}}
    state["tutor"] = add_usage(record, result.usage)


HISTORY_WINDOW = 12
"""The tutor reads at least the last 12 messages, and fewer than 24."""


def history_start(length: int) -> int:
    """Where the tutor's view of the conversation starts: it moves in steps of HISTORY_WINDOW messages, not
    one message a turn, so consecutive turns share the same conversation prefix (a cache hit)."""
    return max(0, length - HISTORY_WINDOW) // HISTORY_WINDOW * HISTORY_WINDOW


def tutor_turn(
    state: dict[str, Any], history: list[dict[str, Any]], student_text: str | None, llm: LLM
) -> tuple[str, bool]:
    """Advance the session by one tutor message; mutates state; returns (reply, is_complete)."""
    problems = state["problems"]
    state["turn"] += 1
    if student_text is None:
        first = problems[0]["question"]
        messages = [Message("system", system_prompt(state)), Message("user", f"(Greet the student and ask: {first})")]
        result = llm.call(messages, offline=TutorRule(state=state, opening=True), seed=turn_seed(state))
        _account(state, llm, result)
        return result.text.strip(), False
    if "ignores_last_message" in state.get("faults", ()):
        # the fault: the student's last message never reaches the tutor
        student_text = ""
        history = history[:-1] if history and history[-1]["role"] == "student" else history
    current = problems[state["index"]]
    upcoming = problems[state["index"] + 1]["question"] if state["index"] + 1 < len(problems) else None
    situation = (
        f"Current problem: {current['question']} (answer: {current['answer']}; hint: {current['hint']}). "
        f"Attempts so far on it: {state['attempts']}. "
        + (
            f"Next problem: {upcoming}."
            if upcoming
            else "This is the last problem: when done, close the session warmly."
        )
    )
    # The system prompt and the conversation come first and stay the same from one turn to the next (a
    # prefix the vendor's prompt cache serves); what changes every turn goes last, as the directive.
    messages = [Message("system", system_prompt(state))]
    for m in history[history_start(len(history)) :]:
        messages.append(Message("assistant" if m["role"] == "tutor" else "user", m["content"]))
    result = llm.call(
        messages,
        directive=situation,
        schema=TUTOR_SCHEMA,
        offline=TutorRule(state=state, student_text=student_text),
        seed=turn_seed(state),
    )
    _account(state, llm, result)
    data = result.data
    state["attempts"] += 1
    if data["move_on"] or state["attempts"] >= MAX_ATTEMPTS + 1:
        state["index"] += 1
        state["attempts"] = 0
    complete = state["index"] >= len(problems)
    return data["reply"].strip(), complete
