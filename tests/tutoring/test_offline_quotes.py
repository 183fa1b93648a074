"""The offline judge quotes whole sentences: a decimal point does not end one."""

from evaluation.tutoring.offline import offline_judge


def test_a_quote_keeps_the_decimal_it_quotes():
    messages = [
        {"turn": 1, "role": "tutor", "content": "Which is larger, 0.3 or 0.25?"},
        {"turn": 2, "role": "student", "content": "0.25"},
        {
            "turn": 3,
            "role": "tutor",
            "content": "Not quite. The answer is 0.3. Tenths are worth more than hundredths here.",
        },
        {"turn": 4, "role": "student", "content": "ok"},
    ]
    problems = offline_judge(messages, None)["problems"]
    quotes = [p["quote"] for p in problems if p["title"].startswith("Gives the answer")]
    assert quotes == ["Not quite. The answer is 0.3."]
    assert all(p["quote"] in " ".join(m["content"] for m in messages) for p in problems)
