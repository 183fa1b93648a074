"""Next-turn tests: replay a real dialogue up to a student turn, let the simulator write that turn with a persona,
and score it against what the real student wrote (after Scarlatos et al. 2026, "Substance or Illusion?": the same
dialogue act, an answer attempted or not, the length, and the wording's similarity).

Per turn: whether the acts agree (student_turns.dialogue_act on both), whether both attempt an answer or neither
does, the absolute log ratio of the lengths (log((words + 1) / (real words + 1)); 0 is the same length), and
ROUGE-L F1 (Lin 2004: the longest common subsequence of word tokens). Per persona and simulator model: the means,
and the shares of turns where the acts agree.

The simulator's calls go as judging's do: directly, several at a time, or (batch=True, or the simulator's LLM config
options {"batch": true}) as one provider batch through providers.batch (stored before it is sent, resumed by the
next process that asks for the same job, failed lines retried directly, lines priced at the batch price). The
persona's prompt is the same on every call of a persona, so the providers' prompt cache serves it after the first.
next_turn_forecast prices a job before it is sent.
"""

import hashlib
import json
import math
import statistics
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.providers import LLM, LLMResult, ProviderError, ProviderSpec, get_llm
from evaluation.providers.base import Message
from evaluation.providers.batch import BatchCall, batch_run, job_key, wants_batch
from evaluation.providers.forecast import CallPlan, estimate_tokens
from evaluation.providers.registry import settings_for
from evaluation.text.measures import tokens
from evaluation.text.student_turns import dialogue_act
from evaluation.tutoring.offline import StudentRule
from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.values import PersonaSpec

BATCH_KIND = "next_turn"
"""The provider batches that carry next-turn tests, one line per replayed student turn."""
MESSAGE_OVERHEAD = 4


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 of two texts' word tokens (0 when either has none)."""
    a, b = tokens(candidate), tokens(reference)
    if not a or not b:
        return 0.0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class TurnScore:
    dialogue: str
    turn: int
    """The student turn's place among the dialogue's messages."""
    real: str
    simulated: str
    act_real: str
    act_simulated: str
    same_act: bool
    same_attempt: bool
    length_gap: float
    """|log((simulated words + 1) / (real words + 1))|."""
    rouge_l: float


def score_turn(dialogue: str, turn: int, real: str, simulated: str, tutor_asked: bool) -> TurnScore:
    act_real = dialogue_act(real, tutor_asked=tutor_asked)
    act_sim = dialogue_act(simulated, tutor_asked=tutor_asked)
    gap = abs(math.log((len(simulated.split()) + 1) / (len(real.split()) + 1)))
    return TurnScore(
        dialogue=dialogue,
        turn=turn,
        real=real,
        simulated=simulated,
        act_real=act_real,
        act_simulated=act_sim,
        same_act=act_real == act_sim,
        same_attempt=(act_real == "answer_attempt") == (act_sim == "answer_attempt"),
        length_gap=round(gap, 4),
        rouge_l=round(rouge_l(simulated, real), 4),
    )


@dataclass(frozen=True)
class NextTurnReport:
    """A persona played by one simulator model against the real students' next turns."""

    persona: str
    simulator: str
    turns: int
    act_agreement: float | None
    attempt_agreement: float | None
    mean_length_gap: float | None
    mean_rouge_l: float | None
    median_words: float | None
    real_median_words: float | None
    scores: tuple[TurnScore, ...]
    failed: int = 0
    """Turns the simulator could not write (the call failed, in a batch and again directly): not scored."""
    batch: str = ""
    """The provider batch that carried the calls ("" for direct calls)."""
    cost_usd: float = 0.0
    """What the calls cost at today's prices (batch lines at the batch price)."""
    cached_input_tokens: int = 0
    """Input tokens the vendor's prompt cache served."""

    def as_dict(self, *, with_turns: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not with_turns:
            data.pop("scores")
        return data


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


Dialogues = Sequence[tuple[str, Sequence[tuple[str, str]]]]


def turn_targets(dialogues: Dialogues, limit: int) -> list[tuple[int, int]]:
    """(dialogue number, message index) of the student turns to replay: each that follows a tutor message, in
    order, at most `limit`."""
    out: list[tuple[int, int]] = []
    for number, (_, messages) in enumerate(dialogues):
        tutor_seen = False
        for i, (role, _) in enumerate(messages):
            if len(out) >= limit:
                return out
            if role == "student" and tutor_seen:
                out.append((number, i))
            tutor_seen = tutor_seen or role == "tutor"
    return out


def _history(messages: Sequence[tuple[str, str]], i: int) -> list[dict[str, Any]]:
    return [{"role": r, "content": t, "turn": k + 1} for k, (r, t) in enumerate(messages[:i])]


def turn_call(persona: PersonaSpec, llm: LLM, dialogues: Dialogues, number: int, i: int, seed: int) -> BatchCall:
    """The simulator's call for one replayed turn, as StudentSimulator.respond makes it (the same seeded decision,
    directive, offline rule and seed), for a direct call or a batch line alike."""
    history = _history(dialogues[number][1], i)
    simulator = StudentSimulator(persona, None, llm, seed=seed * 100_000 + number * 100 + i)
    turn = len(history) + 1
    decision = simulator.decide(turn, history)
    last_tutor = next((m["content"] for m in reversed(history) if m["role"] == "tutor"), "")
    return BatchCall(
        messages=tuple(simulator.messages(history)),
        offline=StudentRule(persona=persona, decision=decision, tutor_message=last_tutor),
        directive=simulator.directive(decision),
        settings=(("seed", simulator.seed * 1000 + turn),),
    )


def _job(persona: PersonaSpec, dialogues: Dialogues, targets: list[tuple[int, int]], seed: int) -> dict[str, Any]:
    """What makes two next-turn batches the same job (a stored one is resumed rather than sent again)."""
    body = json.dumps([asdict(persona), [list(d[1]) for d in dialogues], targets, seed], sort_keys=True, default=str)
    return {"persona": persona.persona_id, "input": hashlib.sha256(body.encode()).hexdigest(), "seed": seed}


def _key(number: int, i: int) -> str:
    return f"d{number}-m{i}"


def _simulate(
    persona: PersonaSpec,
    llm: LLM,
    dialogues: Dialogues,
    targets: list[tuple[int, int]],
    seed: int,
    batch: bool | None,
    workers: int,
) -> tuple[dict[str, LLMResult], int, str]:
    """Every target's answer (custom id -> result), how many failed, and the batch that carried them."""
    if batch or (batch is None and wants_batch(llm)):
        from evaluation.models import ProviderBatch

        answers: dict[str, LLMResult] = {}
        lost: dict[str, str] = {}

        def store(got: dict[str, LLMResult], failed: dict[str, str]) -> None:
            answers.update(got)
            lost.update(failed)

        job = _job(persona, dialogues, targets, seed)
        outcome = batch_run(
            llm,
            kind=BATCH_KIND,
            job=job,
            targets={_key(n, i): [n, i] for n, i in targets},
            call_for=lambda t: turn_call(persona, llm, dialogues, t[0], t[1], seed),
            store=store,
        )
        row = ProviderBatch.objects.filter(kind=BATCH_KIND, job_key=job_key(BATCH_KIND, llm, job)).first()
        name = f"{row.vendor} batch {row.provider_batch_id}" if outcome is not None and row is not None else ""
        return answers, len(lost), name

    def direct(target: tuple[int, int]) -> LLMResult | None:
        call = turn_call(persona, llm, dialogues, *target, seed)
        try:
            return llm.call(list(call.messages), directive=call.directive, offline=call.offline, **dict(call.settings))
        except ProviderError:
            return None

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(targets) or 1))) as pool:
        results = list(pool.map(direct, targets))
    found = {_key(*t): r for t, r in zip(targets, results, strict=True) if r is not None}
    return found, len(targets) - len(found), ""


def next_turns(
    dialogues: Dialogues,
    persona: PersonaSpec,
    llm: LLM,
    *,
    limit: int = 100,
    seed: int = 1,
    batch: bool | None = None,
    workers: int = 4,
) -> NextTurnReport:
    """Replay each dialogue ((id, [(role, text), ...])) to each of its student turns that follows a tutor message,
    have the simulator write it, and score it; at most `limit` turns. batch: True sends the calls as one provider
    batch, False calls directly (`workers` at a time), None follows the LLM config's options."""
    targets = turn_targets(dialogues, limit)
    answers, failed, batch_name = _simulate(persona, llm, dialogues, targets, seed, batch, workers)
    scores: list[TurnScore] = []
    for number, i in targets:
        result = answers.get(_key(number, i))
        if result is None:
            continue
        dialogue, messages = dialogues[number]
        last_tutor = next(t for r, t in reversed(messages[:i]) if r == "tutor")
        scores.append(score_turn(dialogue, i, messages[i][1], result.text.strip(), "?" in last_tutor))
    results = list(answers.values())
    return NextTurnReport(
        persona=persona.persona_id,
        simulator=llm.label,
        turns=len(scores),
        act_agreement=_mean([float(s.same_act) for s in scores]),
        attempt_agreement=_mean([float(s.same_attempt) for s in scores]),
        mean_length_gap=_mean([s.length_gap for s in scores]),
        mean_rouge_l=_mean([s.rouge_l for s in scores]),
        median_words=statistics.median([len(s.simulated.split()) for s in scores]) if scores else None,
        real_median_words=statistics.median([len(s.real.split()) for s in scores]) if scores else None,
        scores=tuple(scores),
        failed=failed,
        batch=batch_name,
        cost_usd=round(sum(r.cost_usd for r in results), 6),
        cached_input_tokens=sum(r.usage.cached_input_tokens for r in results),
    )


def next_turn_plan(
    dialogues: Dialogues, personas: Sequence[PersonaSpec], spec: ProviderSpec, *, limit: int, seed: int = 1
) -> CallPlan:
    """The simulator's calls of a next-turn job and their tokens, each prompt built as the job builds it (nothing
    sent): one call per persona and replayed turn; output low a reply at the persona's word budget, high at the
    role's max_tokens; the persona's system prompt is the cacheable prefix of each call."""
    most = settings_for("simulator", spec).max_tokens
    llm = get_llm("simulator", override="offline")  # builds the prompts only: nothing is called
    calls = prompt = cacheable = low = 0
    targets = turn_targets(dialogues, limit)
    for persona in personas:
        for number, i in targets:
            call = turn_call(persona, llm, dialogues, number, i, seed)
            messages: list[Message] = [*call.messages, Message("system", call.directive or "")]
            prompt += sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in messages)
            cacheable += estimate_tokens(call.messages[0].content) + MESSAGE_OVERHEAD
            low += min(most, estimate_tokens(" ".join(["word"] * persona.response_style.max_words)) + 2)
            calls += 1
    return CallPlan("simulator", spec, calls, prompt, prompt, low, most * calls, cacheable)
