"""Candidate-response sets we write ourselves: each response has a hidden quality per dimension; its text is
built from that quality (mostly: a share of fragments come from another level, as real writing does not
follow a rubric), and each annotator labels the quality with some noise. A judge reading the text should
therefore agree with people well but not perfectly. Deterministic for a seed."""

import random
from typing import Any

YSN = ("No", "To some extent", "Yes")  # worst first
LEVELS = {
    "Mistake_Identification": YSN,
    "Mistake_Location": YSN,
    "Revealing_of_the_Answer": (
        "Yes (but the revealed answer is incorrect)",
        "Yes (and the revealed answer is correct)",
        "No",
    ),
    "Providing_Guidance": YSN,
    "Actionability": YSN,
    "Coherence": YSN,
    "Tutor_Tone": ("Offensive", "Neutral", "Encouraging"),
    "humanlikeness": ("No", "Somewhat", "Yes"),
}
TUTORS = ("Sonnet", "GPT4", "Gemini", "Llama31405B", "Mistral", "Phi3", "Expert", "Novice")


def _fragments(q: dict[str, int], a: int, b: int, wrong: int, right: int) -> list[str]:
    # Written as a tutor might, not from the offline judge's phrase lists (tests/judging/test_card.py checks
    # that none of its phrases occurs): the offline judge has to read these texts as it would anyone's.
    tone = ["Honestly, this is sloppy work.", "", "I really like how you set this out!"][q["Tutor_Tone"]]
    ident = ["", "Hmm, something seems off here.", "That total does not add up."][q["Mistake_Identification"]]
    loc = ["", "Have a second go at the adding.", f"{wrong} is where it slipped: {a} lots of {b} is not {wrong}."][
        q["Mistake_Location"]
    ]
    reveal = [f"It comes to {right + 1}.", f"It comes to {right}.", ""][q["Revealing_of_the_Answer"]]
    guide = ["", "Have a ponder.", f"Start with {a} + {a}, then keep adding {a} until you have {b} of them."][
        q["Providing_Guidance"]
    ]
    act = ["", "Carry on.", "Which number do you reach?"][q["Actionability"]]
    coherent = ["Shall we move on to fractions?", "", ""][q["Coherence"]]
    human = [
        "Here is an explanation in full. Please reach out with any further questions.",
        "Ooh, a fun one to ask!",
        "",
    ][q["humanlikeness"]]
    return [tone, ident, loc, reveal, guide, act, coherent, human]


def candidate_sets(
    dialogues: int, candidates: int = 8, *, seed: int = 1, annotators_every: int = 3, source: str = "synthetic"
) -> list[dict[str, Any]]:
    """`dialogues` candidate-response sets of `candidates` responses; every `annotators_every`-th dialogue
    is labelled by three annotators (the others by one), for the agreement between people."""
    rng = random.Random(seed)
    out = []
    for d in range(dialogues):
        a, b = rng.randint(3, 15), rng.randint(3, 9)
        right = a * b
        wrong = right + rng.choice([-a, a, 2, -2])
        history = (
            f"Tutor: What is {a} x {b}?\nStudent: I think it is {wrong} because I added {a} {b} times.\n"
            f"Tutor: Can you show me how you added them?\nStudent: I did {a} plus {a} and so on, and got {wrong}."
        )
        responses = {}
        for tutor in TUTORS[:candidates]:
            quality = {name: rng.choices([0, 1, 2], weights=[2, 2, 3])[0] for name in LEVELS}
            # what the text shows: the quality, except now and then a fragment from another level
            shown = {n: (v if rng.random() > 0.25 else rng.randint(0, 2)) for n, v in quality.items()}
            text = " ".join(f for f in _fragments(shown, a, b, wrong, right) if f) or "Okay."
            people = ["ann"] + (["ben", "cai"] if d % annotators_every == 0 else [])
            labels = []
            for person in people:
                noisy = {
                    n: LEVELS[n][max(0, min(2, v + (rng.random() < 0.2) * rng.choice([-1, 1])))]
                    for n, v in quality.items()
                }
                labels.append({"annotator": person, "labels": noisy})
            responses[tutor] = {"response": text, "annotation": labels if len(labels) > 1 else labels[0]["labels"]}
            if len(labels) == 1:
                responses[tutor]["annotator"] = "ann"
        out.append(
            {
                "conversation_id": f"{source}-{d}",
                "Data": source,
                "conversation_history": history,
                "Ground_Truth_Solution": str(right),
                "anno_llm_responses": responses,
            }
        )
    return out
