"""Student-turn measures against hand-counted transcripts: lengths, questions, acknowledgements, confusion,
off-task, repeats, acts, correctness where the problem is known, and the dialogue's type-token ratio."""

import pytest

from evaluation.text.student_turns import acknowledgement_only, dialogue_act, measure_dialogue, tokens
from evaluation.tutoring.realism import answer_check

DIALOGUE = [
    ("tutor", "Hi! What is 3/8 + 2/8?"),
    ("student", "5/8"),  # 1 word, 3 characters, an answer, right
    ("tutor", "Yes! What is 47 + 38?"),
    ("student", "is it 75?"),  # 3 words, asks, an answer, wrong (85)
    ("tutor", "Not quite. Add the ones first."),
    ("student", "ok"),  # acknowledgement only
    ("tutor", "Why do we carry the ten?"),
    ("student", "I don't know"),  # confusion
    ("system", "the tutor was slow"),  # context, not a student turn
    ("tutor", "What makes a new ten?"),
    ("student", "can I go to the bathroom"),  # off-task, and asks (question word first)
    ("tutor", "After this one. Which is larger, 0.5 or 0.45?"),
    ("student", "ok"),  # acknowledgement, repeats turn 3
    ("tutor", "Which is larger?"),
    ("student", "the first one"),  # answers a question without a number
    ("tutor", "Great."),
    ("student", "why is that bigger though"),  # a question (question word first)
]


@pytest.fixture(scope="module")
def measured():
    return measure_dialogue(DIALOGUE, dialogue="d1", check=answer_check)


def test_counts_match_hand_counts(measured):
    turns = measured.turns
    assert len(turns) == 8
    assert [t.words for t in turns] == [1, 3, 1, 3, 6, 1, 3, 5]
    assert [t.characters for t in turns] == [3, 9, 2, 12, 24, 2, 13, 25]
    assert [t.asks_question for t in turns] == [False, True, False, False, True, False, False, True]
    assert [t.acknowledgement_only for t in turns] == [False, False, True, False, False, True, False, False]
    assert [t.confusion for t in turns] == [False, False, False, True, False, False, False, False]
    assert [t.off_task for t in turns] == [False, False, False, False, True, False, False, False]
    assert [t.repeat for t in turns] == [False, False, False, False, False, True, False, False]


def test_acts_and_correctness(measured):
    assert [t.act for t in measured.turns] == [
        "answer_attempt",
        "answer_attempt",
        "acknowledgement",
        "confusion",
        "off_task",
        "acknowledgement",
        "answer_attempt",
        "question",
    ]
    # Right where the problem is known (3/8 + 2/8 = 5/8; 47 + 38 = 85, not 75); unknown for a bare phrase.
    assert [t.correct for t in measured.turns] == [True, False, None, None, None, None, None, None]


def test_type_token_ratio(measured):
    words = [w for role, text in DIALOGUE if role == "student" for w in tokens(text)]
    assert len(words) == 23
    assert measured.type_token_ratio == round(len(set(words)) / 23, 6)
    assert len(set(words)) == 19  # ok x2, is x2, the x2, i x2 (i, don't -> "i", "don't")


@pytest.mark.parametrize(
    ("text", "act"),
    [
        ("ok thank you", "acknowledgement"),
        ("got it, thanks", "acknowledgement"),
        ("yes?", "acknowledgement"),
        ("okay so 12", "answer_attempt"),
        ("twelve", "answer_attempt"),
        ("idk", "confusion"),
        ("what", "confusion"),
        ("what?", "confusion"),
        ("Can you show me an example?", "question"),
        ("gtg bye", "off_task"),
        ("my dog ate it", "off_task"),
        ("hmm let me think", "other"),
    ],
)
def test_acts_by_rule(text, act):
    assert dialogue_act(text) == act


def test_a_reply_to_a_question_is_an_answer_only_when_a_question_was_asked():
    assert dialogue_act("the bigger piece", tutor_asked=True) == "answer_attempt"
    assert dialogue_act("the bigger piece", tutor_asked=False) == "other"


def test_acknowledgement_needs_every_word_to_acknowledge():
    assert acknowledgement_only(["i", "see"])
    assert not acknowledgement_only(["i", "see", "two"])
    assert not acknowledgement_only([])
