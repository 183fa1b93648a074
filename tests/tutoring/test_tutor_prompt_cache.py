"""The reference tutor keeps its prompt's prefix the same from turn to turn, so the vendor's cache serves it."""

import pytest

from evaluation.providers import Meter, ProviderSpec, get_llm
from evaluation.tutoring.tutor import history_start, initial_state, tutor_turn

TOPIC = {
    "topic_id": "two-digit-addition-regrouping",
    "name": "Two-digit addition with regrouping",
    "grade": 3,
    "learning_objectives": ["add two-digit numbers", "regroup ones into tens"],
    "common_misconceptions": ["forgets to carry the ten"],
}


@pytest.mark.parametrize(
    ("length", "start"), [(0, 0), (5, 0), (12, 0), (23, 0), (24, 12), (35, 12), (36, 24), (100, 84)]
)
def test_the_history_window_moves_in_steps_of_twelve(length, start):
    assert history_start(length) == start
    assert 12 <= length - start < 24 or (length < 12 and start == 0)


# A topic with a long list of objectives: its tutor prompt is past the vendor's minimum cacheable length (1,024
# tokens for a model it does not name); the short TOPIC's (about 300 tokens) is cached by no Claude model.
LONG_TOPIC = {
    **TOPIC,
    "learning_objectives": [
        f"objective {i}: add two-digit numbers whose ones sum past ten, and say the regrouping in words"
        for i in range(60)
    ],
}


def test_consecutive_tutor_turns_share_their_prefix_and_read_it_from_the_cache(loopback):
    llm = get_llm("tutor", override=ProviderSpec("anthropic", "claude-tutor-1", loopback.anthropic_url), meter=Meter())
    state = initial_state(LONG_TOPIC, "s-1", seed=7)
    history = [{"role": "tutor", "content": "Hi! What is 38 + 45?"}]
    bodies, usages = [], []
    for answer in ["73", "83, I carried the ten", "I think 90"]:
        history.append({"role": "student", "content": answer})
        before = len(loopback.requests)
        reply, _ = tutor_turn(state, history, answer, llm)
        history.append({"role": "tutor", "content": reply})
        assert len(loopback.requests) == before + 1
        bodies.append(loopback.requests[-1].body)
        usages.append(llm.meter.usage)

    # The system prompt is the same block every turn; the turn's situation (problem, attempts) comes last.
    systems = [[block["text"] for block in body["system"]] for body in bodies]
    assert systems[0] == systems[1] == systems[2]
    assert "Current problem" not in " ".join(systems[0])
    last_turn = bodies[1]["messages"][-1]["content"]
    assert "Current problem" in str(last_turn) and "83, I carried the ten" in str(last_turn)
    # The first call writes the prefix to the cache; every later one reads it.
    assert usages[0].cache_write_tokens > 0 and usages[0].cached_input_tokens == 0
    assert usages[1].cached_input_tokens > 0 and usages[2].cached_input_tokens > usages[1].cached_input_tokens


def test_a_tutor_prompt_shorter_than_the_models_minimum_is_not_cached(loopback):
    llm = get_llm("tutor", override=ProviderSpec("anthropic", "claude-tutor-1", loopback.anthropic_url), meter=Meter())
    state = initial_state(TOPIC, "s-1", seed=7)
    history = [{"role": "tutor", "content": "Hi! What is 38 + 45?"}]
    for answer in ["73", "83, I carried the ten"]:
        history.append({"role": "student", "content": answer})
        reply, _ = tutor_turn(state, history, answer, llm)
        history.append({"role": "tutor", "content": reply})
    assert llm.meter.usage.cache_write_tokens == llm.meter.usage.cached_input_tokens == 0
