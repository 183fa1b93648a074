"""The offline judge's summary names its weakest dimension in words, as the reports do."""

from evaluation.tutoring.offline import offline_judge

# The tutor takes up each worry in its reply but never says a warm word after it: attunement is the low score.
COLD_BUT_ON_TOPIC = [
    {"turn": 1, "role": "tutor", "content": "What is one half plus one quarter?"},
    {"turn": 2, "role": "student", "content": "I am confused about the denominator"},
    {"turn": 3, "role": "tutor", "content": "The denominator counts equal parts of the whole."},
    {"turn": 4, "role": "student", "content": "Not sure what equal parts means"},
    {"turn": 5, "role": "tutor", "content": "Equal parts means pieces of the same size, like slices of a pizza."},
]


def test_the_summary_names_the_weakest_dimension_in_words():
    judgement = offline_judge(COLD_BUT_ON_TOPIC, None)
    scores = judgement["scores"]
    assert min(scores, key=scores.get) == "emotional_attunement", scores
    assert judgement["summary"].endswith("; weakest: emotional attunement.")
    assert "emotional_attunement" not in judgement["summary"]
