"""The tutoring gate's error rates, measured: many seeded batches of (a) the reference tutor against its own
baseline (every REGRESSION is a false alarm) and (b) `degraded-tutor` against the reference tutor's baseline
(every REGRESSION is a hit), at the planner's runs per persona and at one run per persona, judged by the
offline judge and by the loopback server's judge answering the offline judge's scores with Gaussian noise of
a known sd (rounded to whole points, clipped to 1-10), through the real openai SDK.

The conversations are the runs' own code (the simulator, the reference tutor's turn with its faults, the
judge's call), played in this process without the protocol server and the database, so that hundreds of
batches take minutes; the gate is regression.gate, as every door calls it. Batches are unpaired (another
seed than the baseline's), the default case and the harder one.

    nice -n 10 python bench/gate_power.py [--trials 40] [--max-turns 6] [--noise 1.0] [--judges offline,loopback]

Prints, per judge and k: the false-alarm rate and the power with their Wilson 95% intervals
(statsmodels), how often the gate said inconclusive, and the runs used.
"""

import argparse
import asyncio
import random
import statistics
import sys
import time
from typing import Any

from _django import setup

setup(fresh_database=True)

from statsmodels.stats.proportion import proportion_confint  # noqa: E402

from evaluation.models import Persona, Topic  # noqa: E402
from evaluation.providers import get_llm  # noqa: E402
from evaluation.providers.loopback import LoopbackLLMServer, Reply  # noqa: E402
from evaluation.runs import noise  # noqa: E402
from evaluation.runs.selectors import degraded_tutor  # noqa: E402
from evaluation.tutoring import judge, regression, tutor  # noqa: E402
from evaluation.tutoring.offline import offline_judge  # noqa: E402
from evaluation.tutoring.simulator import StudentSimulator  # noqa: E402
from evaluation.tutoring.values import PersonaSpec, TopicSpec  # noqa: E402

TOPIC = "two-digit-addition-regrouping"
FAULTS = tuple(degraded_tutor().extra["faults"])


class NoisyJudge:
    """The loopback server's answer to the judge's next call: the offline judge's verdict on the conversation,
    its scores moved by N(0, sd), rounded and clipped to 1-10."""

    def __init__(self, sd: float, seed: int):
        self.sd, self.rng, self.pending = sd, random.Random(seed), None

    def __call__(self, endpoint: str, body: dict[str, Any], n: int) -> Reply:
        verdict = dict(self.pending or {})
        verdict["scores"] = {
            d: int(min(10, max(1, round(s + self.rng.gauss(0, self.sd))))) for d, s in verdict["scores"].items()
        }
        return Reply(json=verdict)


def conversation(persona: PersonaSpec, topic: TopicSpec, seed: int, max_turns: int, faults: tuple[str, ...]) -> list:
    """One simulated run's messages: the simulator and the (offline) reference tutor, turn by turn, as the
    protocol server and the client play them."""
    offline = get_llm("simulator", override="offline")
    state = tutor.initial_state(topic.as_dict(), "bench", 8, seed=seed, faults=faults)
    sim = StudentSimulator(persona, topic, offline, seed=seed)
    messages: list[dict[str, Any]] = []

    def add(role: str, content: str) -> None:
        messages.append({"turn": len(messages) + 1, "role": role, "content": content})

    reply, done = tutor.tutor_turn(state, [], None, get_llm("tutor", override="offline"))
    add("tutor", reply)
    turns = 0
    while not done and turns < max_turns:
        turns += 1
        text, _ = asyncio.run(sim.respond([{"role": m["role"], "content": m["content"]} for m in messages], turns))
        add("student", text)
        reply, done = tutor.tutor_turn(state, messages, text, get_llm("tutor", override="offline"))
        add("tutor", reply)
    return messages


def scores(messages: list, persona: PersonaSpec, topic: TopicSpec, seed: int, judge_llm: Any, noisy: Any) -> dict:
    if noisy is not None:
        noisy.pending = offline_judge(messages, persona)
    verdict = judge.judge_conversation(messages, persona, topic, judge_llm, seed=seed)
    return {s.dimension: float(s.score) for s in verdict.scores}


def batch(personas, topic, seed, k, max_turns, faults, judge_llm, noisy, counter) -> list[dict[str, Any]]:
    runs = []
    for index, persona in enumerate(personas):
        for repeat in range(1, k + 1):
            run_seed = seed + index * 1000 + repeat - 1  # as run_start seeds a batch (services.replay_seed)
            found = scores(
                conversation(persona, topic, run_seed, max_turns, faults), persona, topic, run_seed, judge_llm, noisy
            )
            counter[0] += 1
            runs.append(
                {
                    "run_id": f"{persona.persona_id}_{run_seed}",
                    "persona_id": persona.persona_id,
                    "topic": topic.topic_id,
                    "seed": run_seed,
                    "scores": found,
                    "avg_score": statistics.fmean(found.values()),
                    "status": "completed",
                }
            )
    return runs


def gate(candidate: list, base: list, threshold: float) -> str:
    recorded = {
        "id": "baseline",
        "means": regression.baseline_means(base),
        "runs": base,
        "rule": "noise-aware",
        "threshold": threshold,
        "alpha": noise.ALPHA,
        "power": noise.POWER,
    }
    return regression.gate(candidate, recorded, min_coverage=0.5).outcome


def rate(hits: int, n: int) -> str:
    low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
    return f"{hits}/{n} = {hits / n:.0%} [{low:.0%}, {high:.0%}]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=40, help="Seeded batches per judge and k")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--noise", type=float, default=1.0, help="The loopback judge's noise sd, in points")
    parser.add_argument("--threshold", type=float, default=1.0)
    parser.add_argument("--judges", default="offline,loopback")
    parser.add_argument("--personas", type=int, default=0, help="Use the first N personas (0: all)")
    parser.add_argument(
        "--k", type=int, default=0, help="Runs per persona of the batch and the baseline (0: the planner's)"
    )
    args = parser.parse_args()
    topic = TopicSpec.from_record(Topic.objects.get(topic_id=TOPIC))
    personas = [PersonaSpec.from_record(p) for p in Persona.objects.order_by("persona_id")]
    personas = personas[: args.personas] if args.personas else personas
    print(
        f"{len(personas)} personas, topic {TOPIC}, {args.max_turns} turns, threshold {args.threshold:g}, "
        f"family alpha {noise.ALPHA:g}, power {noise.POWER:g}; {args.trials} seeded batches per row; unpaired seeds"
    )
    server = None
    for name in args.judges.split(","):
        noisy = None
        if name == "loopback":
            noisy = NoisyJudge(args.noise, seed=2026)
            server = LoopbackLLMServer(responder=noisy).start()
            judge_llm = get_llm("judge", override=f"openai/noisy-judge@{server.openai_url}")
            label = f"loopback judge (offline scores + N(0, {args.noise:g}) noise)"
        else:
            judge_llm = get_llm("judge", override="offline")
            label = "offline judge"
        counter = [0]
        started = time.perf_counter()
        pilot = batch(personas, topic, 9_000_000, 2, args.max_turns, (), judge_llm, noisy, counter)
        found = noise.plan(regression.observations(pilot), threshold=args.threshold)
        if args.k:
            k, k_base = args.k, args.k
            print(f"\n{label}: k={k} as asked, against a baseline of {k_base} runs per persona")
        elif found is None or found.runs_per_persona is None:
            print(f"\n{label}: the planner found no k up to {noise.MAX_PLANNED_RUNS}; skipped")
            continue
        else:
            k = found.runs_per_persona
            k_base = found.baseline_runs_per_persona or 2
            print(
                f"\n{label}: the planner asks k={found.runs_per_persona}"
                + (f" with a baseline of {k_base} runs per persona" if found.baseline_runs_per_persona else "")
                + " (from a 2-run pilot baseline); detects at k: "
                + ", ".join(f"{d} {x:g}" for d, x in found.detects.items())
            )
        rows: dict[tuple[int, str], list[str]] = {}
        for trial in range(args.trials):
            seed = 1 + trial * 7919
            for kk, kb in ((k, k_base), (1, 2)):
                base = batch(personas, topic, seed, kb, args.max_turns, (), judge_llm, noisy, counter)
                same = batch(personas, topic, seed + 500, kk, args.max_turns, (), judge_llm, noisy, counter)
                worse = batch(personas, topic, seed + 500, kk, args.max_turns, FAULTS, judge_llm, noisy, counter)
                rows.setdefault((kk, "reference"), []).append(gate(same, base, args.threshold))
                rows.setdefault((kk, "degraded"), []).append(gate(worse, base, args.threshold))
            if trial % 10 == 9:
                print(
                    f"  ... {trial + 1} trials, {counter[0]} runs, {time.perf_counter() - started:.0f} s",
                    file=sys.stderr,
                )
        for kk, kb in ((k, k_base), (1, 2)):
            ref, deg = rows[(kk, "reference")], rows[(kk, "degraded")]
            n = len(ref)
            print(
                f"  k={kk} against a {kb}-run baseline: false alarms {rate(ref.count('regression'), n)} "
                f"(inconclusive {ref.count('inconclusive')}, pass {ref.count('pass')}); "
                f"power {rate(deg.count('regression'), n)} (inconclusive {deg.count('inconclusive')}, "
                f"pass {deg.count('pass')})"
            )
        print(f"  runs used: {counter[0]} in {time.perf_counter() - started:.0f} s")
    if server is not None:
        server.stop()


if __name__ == "__main__":
    main()
