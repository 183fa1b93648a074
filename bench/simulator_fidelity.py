"""Simulator fidelity: over N seeded turns per persona, the realised correct-answer rate against the
persona's correct_answer_probability. Personas are seeded as run_start seeds them in a batch
(base seed + 1000 x persona index + repeat), so the table is what a real batch would realise.

    python bench/simulator_fidelity.py [--turns 200] [--seed 2026] [--trials 50]
"""

import argparse
import json

from _django import ROOT

from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.values import PersonaSpec


def realised(persona: dict, seed: int, turns: int) -> float:
    sim = StudentSimulator(PersonaSpec.from_dict(persona), None, llm=None, seed=seed)  # type: ignore[arg-type]
    return sum(sim.decide(t).correct for t in range(1, turns + 1)) / turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--trials", type=int, default=50, help="Other base seeds, for the spread")
    args = parser.parse_args()
    personas = [json.loads(p.read_text()) for p in sorted((ROOT / "personas").glob("*.json")) if p.stem != "schema"]
    print(
        f"{'persona':<22}{'target':>8}{'realised':>10}{'diff (pp)':>11}{'worst of ' + str(args.trials) + ' seeds':>20}"
    )
    worst = 0.0
    for index, persona in enumerate(personas):
        target = persona["correct_answer_probability"]
        rate = realised(persona, args.seed + index * 1000 + 1, args.turns)
        spread = max(
            abs(realised(persona, s * 7919 + index * 1000 + 1, args.turns) - target) for s in range(args.trials)
        )
        worst = max(worst, abs(rate - target))
        print(
            f"{persona['persona_id']:<22}{target:>8.0%}{rate:>10.1%}{(rate - target) * 100:>+11.1f}{spread * 100:>19.1f}pp"
        )
    print(
        f"largest difference at seed {args.seed}: {worst * 100:.1f} percentage points over {args.turns} turns per persona"
    )


if __name__ == "__main__":
    main()
