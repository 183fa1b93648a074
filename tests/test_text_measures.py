"""Text measures: agreement markers match whole words and phrases, and negations turn them off."""

import pytest

from evaluation.text import agreement_ratio, is_agreement


@pytest.mark.parametrize(
    "text",
    [
        "I agree with that.",
        "Agreed!",
        "Totally agree!",
        "Exactly, you're right.",
        "You\u2019re right about the fractions.",
        "you are right",
        "Great point.",
        "Absolutely.",
        "Definitely the second option.",
        "Well said, Sam.",
        "Same here",
        "Me too!",
        "I second that.",
        "+1",
        "Yes! Let's plant them.",
        "I couldn't agree more.",
        "No, you're right, I was wrong.",
        "I have no idea why, but I agree.",
        "I agree that it is not ideal.",
    ],
)
def test_agreement_is_detected(text):
    assert is_agreement(text)


@pytest.mark.parametrize(
    "text",
    [
        "I disagree with that.",
        "That is definitely not it",
        "Absolutely not!",
        "Not exactly.",
        "I don't agree.",
        "I do not agree with any of it.",
        "I never agree with him on this.",
        "I don't think you're right.",
        "That isn't a good point.",
        "We disagree on the method, totally.",
        "Her eyes! They were green.",
        "We reached an agreement on price.",
        "C+12 is not a grade.",
        "The meeting is tomorrow.",
    ],
)
def test_disagreement_negation_and_partial_words_are_not_agreement(text):
    assert not is_agreement(text)


def test_agreement_ratio_counts_only_real_agreement():
    assert agreement_ratio(["I agree", "I disagree with that.", "That is definitely not it", "Exactly."]) == 0.5
    assert agreement_ratio([]) == 0.0
