"""Spec 001's judging rubric as data: five dimensions anchored at five levels, persona criteria, fixes."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Dimension:
    """One scored dimension of the tutor-session rubric: everything the prompt, schema, reports and CLI need."""

    name: str
    question: str
    levels: tuple[str, str, str, str, str]
    """What the tutor does at 1-2, 3-4, 5-6, 7-8 and 9-10."""
    short: str
    """A column heading of at most five letters."""


ANCHORS = ("1-2", "3-4", "5-6", "7-8", "9-10")
SLUG, VERSION = "tutoring-judge", 1
"""The built-in tutoring judge's rubric (this file; not the admin's `tutor-session` rubric of the judging
pages), recorded with every judgement: raise VERSION when a dimension, question or anchor changes (a test
pins the rubric's content to its version; the judge prompt's hash changes with any edit of its text too)."""

RUBRIC: tuple[Dimension, ...] = (
    Dimension(
        "responsiveness",
        "Does the tutor adapt to student signals?",
        (
            "ignores what the student says; a fixed script regardless of answers or signals",
            "notices answers but not confusion, boredom or requests; rarely changes course",
            "responds to explicit requests but misses implicit signals",
            "adapts to most signals: slows down, speeds up, changes examples when asked or when it is implied",
            "every move is shaped by what this student just showed; signals are caught early, even subtle ones",
        ),
        "resp",
    ),
    Dimension(
        "explanation_quality",
        "Does the tutor explain well and try different approaches?",
        (
            "explanations are wrong, missing or confusing",
            "correct but generic; repeats the same explanation when it fails",
            "clear explanations with one approach; some attempt to diagnose mistakes",
            "clear, concrete explanations; tries a new approach when the first fails; addresses misconceptions",
            "explanations fit this student exactly, with well-chosen examples and the misconception named and fixed",
        ),
        "expl",
    ),
    Dimension(
        "emotional_attunement",
        "Does the tutor read the room emotionally?",
        (
            "dismissive or cold; misses distress or frustration entirely",
            "generic praise and encouragement unrelated to how the student feels",
            "acknowledges strong emotions but in a formulaic way",
            "reads frustration, boredom and shyness and responds to them warmly",
            "consistently attuned: builds confidence, respects mood, turns setbacks into progress",
        ),
        "emot",
    ),
    Dimension(
        "pacing",
        "Is the tutor moving at the right speed for this student?",
        (
            "badly mismatched: drags a fast student or rushes a struggling one throughout",
            "often too fast or too slow for this student; too much at once",
            "acceptable pace with clear stretches of mismatch",
            "mostly right for this student; adjusts after signs of mismatch",
            "exactly right throughout: step size, length and challenge tuned to this student",
        ),
        "pace",
    ),
    Dimension(
        "authenticity",
        "Does it feel like a real teacher or a chatbot?",
        (
            "robotic: templates, repeated phrases, walls of text",
            "noticeably scripted; formulaic praise and openers",
            "mostly natural with some chatbot habits",
            "sounds like a real teacher, varied and personal",
            "indistinguishable from an excellent human tutor",
        ),
        "auth",
    ),
)
"""One registration per dimension: the judge's prompt and schema, the offline judge and the reports derive from it."""

DIMENSIONS: dict[str, Dimension] = {d.name: d for d in RUBRIC}

PERSONA_CRITERIA = {
    "ace": "Did the tutor avoid patronising? Speed up and offer harder problems once the student showed mastery?",
    "average_student": "Did the tutor give examples when introducing something new, and check understanding?",
    "confused_confident": "Did the tutor surface the misconception behind confident wrong answers instead of just correcting?",
    "distractor": "Did the tutor redirect gently, using the student's interests, without scolding or losing the thread?",
    "quiet_one": "Did the tutor draw the student out with low-pressure questions, and check understanding beyond 'ok'?",
    "repetition_detector": "Did the tutor vary its phrasing and approach, especially after being called out?",
    "simplicity_seeker": "Did the tutor keep steps short and single, and simplify when the student was overwhelmed?",
    "struggler": "Did the tutor encourage, create small wins, and break problems down without doing them for her?",
}
GENERIC_CRITERIA = "Judge every dimension against what this particular student needs, not an average student."

SUGGESTED_FIXES = {
    "missed_student_signal": "Have the tutor check the student's last message for confusion, boredom or distress before replying.",
    "wrong_pacing": "Tune step size and reply length to the persona; speed up after successes, slow down after errors.",
    "repetitive_approach": "Track the explanations already given and require a different approach after a failed one.",
    "emotional_mismatch": "Acknowledge the student's feelings explicitly before continuing with the maths.",
    "missed_misconception": "Ask the student to explain their reasoning after a wrong answer and name the misconception.",
    "over_scaffolding": "Let the student attempt the step before giving hints; withdraw support as they succeed.",
    "conversation_history_window": "Increase the conversation history window.",
    "session_summary_lossy": "Improve session summary to capture narrative context.",
    "prompt_quality": "Revise the tutor's system prompt for the behaviour this problem shows.",
    "model_capability": "Try a stronger tutor model for this persona, or simplify what the prompt asks of it.",
    "other": "Read the quoted turns and decide on a targeted fix.",
}
