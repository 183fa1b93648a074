"""An incorrect simulated turn's mistake fits the topic: the persona's own mistakes about the topic, else
the topic's common misconceptions, else a generic slip; the seed still replays the same decisions."""

import dataclasses
import json
from pathlib import Path

from evaluation.tutoring.simulator import GENERIC_MISTAKES, StudentSimulator, topic_mistakes
from evaluation.tutoring.values import PersonaSpec, TopicSpec

ROOT = Path(__file__).resolve().parents[2]


def persona(name: str) -> PersonaSpec:
    return PersonaSpec.from_dict(json.loads((ROOT / "personas" / f"{name}.json").read_text()))


def topic(name: str) -> TopicSpec:
    return TopicSpec.from_dict(json.loads((ROOT / "topics" / f"{name}.json").read_text()))


def mistakes_made(p: PersonaSpec, t: TopicSpec | None, seed: int = 7, turns: int = 200) -> set[str]:
    sim = StudentSimulator(p, t, llm=None, seed=seed)
    return {d.mistake for d in (sim.decide(turn) for turn in range(1, turns)) if not d.correct}


def test_comparing_decimals_never_draws_a_fraction_mistake():
    decimals = topic("comparing-decimals")
    made = mistakes_made(persona("struggler"), decimals)
    assert "adds numerators and denominators straight across" not in made
    assert made == set(decimals.common_misconceptions)


def test_the_personas_own_mistake_about_the_topic_comes_first():
    assert mistakes_made(persona("quiet_one"), topic("comparing-decimals")) == {"lines up decimals by their last digit"}
    assert mistakes_made(persona("struggler"), topic("adding-fractions-like-denominators")) == {
        "adds numerators and denominators straight across"
    }


def test_without_a_topic_the_persona_keeps_its_own_mistakes():
    struggler = persona("struggler")
    assert mistakes_made(struggler, None) == set(struggler.common_mistakes)


def test_a_topic_without_misconceptions_and_no_fitting_mistake_gets_a_generic_slip():
    bare = dataclasses.replace(topic("comparing-decimals"), common_misconceptions=())
    assert topic_mistakes(persona("struggler"), bare) == GENERIC_MISTAKES
    assert mistakes_made(persona("struggler"), bare) <= set(GENERIC_MISTAKES)


def test_the_seed_replays_the_same_mistakes():
    decimals, struggler = topic("comparing-decimals"), persona("struggler")
    first, second = (StudentSimulator(struggler, decimals, llm=None, seed=11) for _ in range(2))
    assert [first.decide(t) for t in range(1, 40)] == [second.decide(t) for t in range(1, 40)]
