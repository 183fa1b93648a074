"""The proposition engine: a judge scores claims against message context on TinyTroupe's 0-9 scale
(0 completely false, 9 completely true), many checks per LLM call in bounded batches. A reply
that leaves a check out or scores it outside 0-9 is asked again once for those checks; a check
still without a valid score is marked unscored with the reason, and everything else goes on."""

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from evaluation.drift.offline import PropositionRule
from evaluation.providers import (
    LLM,
    AuthError,
    CostLimitReached,
    LLMResult,
    Message,
    MissingKeyError,
    ProviderError,
    ReplayMiss,
)
from evaluation.providers.batch import BatchCall, request_for

# Not a judge's bad day but a setup that cannot work: stop the run instead of scoring around it.
FATAL = (ReplayMiss, AuthError, MissingKeyError, CostLimitReached)

SCORE_SCHEMA = {
    "type": "object",
    "required": ["scores"],
    "properties": {
        "scores": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "score", "reasoning"],
                "properties": {"id": {"type": "string"}, "score": {"type": "number"}, "reasoning": {"type": "string"}},
            },
        }
    },
}

SYSTEM = """You evaluate claims about a character agent's behaviour. For each check, read the
context and score how true the claim is on a 0-9 scale: 0 = completely false, 9 = completely
true. Judge only what the context shows. Reply with JSON:
{"scores": [{"id": "<check id>", "score": <0-9>, "reasoning": "<one sentence>"}, ...]}
with exactly one entry per check id."""
PROMPT_VERSION = hashlib.sha256(SYSTEM.encode()).hexdigest()[:12]
"""Part of the judge configuration a baseline records: a changed judge prompt is another judge."""


class Judge(Protocol):
    """What the scorers call: an LLM, or a MockJudge."""

    @property
    def label(self) -> str: ...

    def call(self, messages: list[Message], **kwargs: Any) -> LLMResult: ...


@dataclass
class MockJudge:
    """Mock-judge mode: the recorded answer where a recording matches the request, else the offline
    rule-based judge, so any input is scored deterministically with no LLM call. `used` counts the
    calls each answered since the last `take_used()`."""

    replay: LLM
    offline: LLM
    used: Counter[str] = field(default_factory=Counter)

    @property
    def label(self) -> str:
        return f"mock-judge ({self.replay.label}, else {self.offline.label})"

    def call(self, messages: list[Message], **kwargs: Any) -> LLMResult:
        try:
            result = self.replay.call(messages, **kwargs)
        except ReplayMiss:
            self.used[self.offline.label] += 1
            return self.offline.call(messages, **kwargs)
        self.used[self.replay.label] += 1
        return result

    def take_used(self) -> str:
        """Who answered since the last take: 'replay/x', 'offline/y (no recording matched)' or both with counts."""
        used, self.used = self.used, Counter()
        if not used:
            return "no judge call"
        if len(used) == 1:
            (who,) = used
            return who if who == self.replay.label else f"{who} (no recording matched)"
        return ", ".join(f"{who} ({n} call(s))" for who, n in sorted(used.items()))


@dataclass
class CollectingJudge:
    """Pass one of judging by provider batch: every call the scorers make is recorded (in order) and
    answered by the offline rule, which costs nothing; the recorded calls are then sent as one batch."""

    llm: LLM
    offline: LLM
    calls: list[BatchCall] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.llm.label

    def call(self, messages: list[Message], **kwargs: Any) -> LLMResult:
        self.calls.append(_batch_call(messages, kwargs))
        return self.offline.call(messages, **kwargs)


@dataclass
class BatchedJudge:
    """Pass two: the provider batch's answer where the request is one the batch carried (by fingerprint),
    the reason where its line failed there and again directly, else (a repair) a direct call."""

    llm: LLM
    answers: dict[str, LLMResult]
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.llm.label

    def call(self, messages: list[Message], **kwargs: Any) -> LLMResult:
        key = request_for(self.llm, _batch_call(messages, kwargs)).fingerprint()
        if key in self.answers:
            return self.answers[key]
        if key in self.failed:
            raise ProviderError(self.failed[key])
        return self.llm.call(messages, **kwargs)


def _batch_call(messages: list[Message], kwargs: dict[str, Any]) -> BatchCall:
    rest = {k: v for k, v in kwargs.items() if k not in ("schema", "offline", "directive")}
    return BatchCall(
        messages=tuple(messages),
        schema=kwargs.get("schema"),
        offline=kwargs.get("offline"),
        directive=kwargs.get("directive"),
        settings=tuple(sorted(rest.items())),
    )


@dataclass(frozen=True)
class Check:
    id: str
    claim: str
    context: str


@dataclass
class Scored:
    score: float | None
    reasoning: str


def _prompt(checks: list[Check]) -> str:
    return "\n\n".join(f"### Check {c.id}\nClaim: {c.claim}\nContext:\n{c.context}" for c in checks)


def _valid(entries: list[dict[str, Any]], wanted: set[str]) -> tuple[dict[str, Scored], dict[str, str]]:
    good: dict[str, Scored] = {}
    bad: dict[str, str] = {}
    for entry in entries:
        cid = str(entry.get("id"))
        if cid not in wanted:
            continue
        score = entry.get("score")
        if isinstance(score, int | float) and not isinstance(score, bool) and 0 <= score <= 9:
            good[cid] = Scored(float(score), str(entry.get("reasoning", "")))
        else:
            bad[cid] = f"score {score!r} is outside 0-9"
    for cid in wanted - good.keys() - bad.keys():
        bad[cid] = "the judge's reply had no entry for this check"
    return good, bad


def _rule(checks: list[Check]) -> PropositionRule:
    return PropositionRule(tuple((c.id, c.claim, c.context) for c in checks))


def score_checks(llm: Judge, checks: list[Check], *, batch_size: int = 20) -> dict[str, Scored]:
    """Score every check; the number of calls is ceil(len / batch_size) plus one repair per batch that needs it."""
    results: dict[str, Scored] = {}
    for start in range(0, len(checks), batch_size):
        batch = checks[start : start + batch_size]
        wanted = {c.id for c in batch}
        try:
            reply = llm.call(
                [Message("system", SYSTEM), Message("user", _prompt(batch))],
                schema=SCORE_SCHEMA,
                offline=_rule(batch),
            )
        except FATAL:
            raise
        except ProviderError as exc:
            results.update({c.id: Scored(None, f"unscored: the judge failed ({exc})") for c in batch})
            continue
        good, bad = _valid(reply.data["scores"], wanted)
        if bad:
            retry = [c for c in batch if c.id in bad]
            problems = "; ".join(f"{cid}: {reason}" for cid, reason in bad.items())
            ask = f"Your previous reply had problems ({problems}). Score these checks again, each 0-9:\n\n{_prompt(retry)}"
            try:
                again = llm.call(
                    [Message("system", SYSTEM), Message("user", ask)],
                    schema=SCORE_SCHEMA,
                    offline=_rule(retry),
                )
                fixed, still_bad = _valid(again.data["scores"], set(bad))
            except FATAL:
                raise
            except ProviderError as exc:
                fixed, still_bad = {}, {cid: f"{reason}; the repair failed ({exc})" for cid, reason in bad.items()}
            good.update(fixed)
            for cid, reason in still_bad.items():
                good[cid] = Scored(None, f"unscored: {reason} (after one repair)")
        results.update(good)
    return results


def snippet(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
