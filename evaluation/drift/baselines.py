"""Golden baselines: one JSON file per agent in baselines/, read in both shapes teams bring.

- ours: {"agent", "captured_at", "dimensions", "proposition_scores" ({dimension: {id: score}}),
  "judge": {"provider", "model", "prompt"}, "rubric" ({dimension: version of its propositions}),
  "max_messages", "mode", "sample_size", "samples"} (older files carry "judge_model" and "created_at"
  instead, and no rubric or max_messages);
- the drift harness's: {"agentId", "capturedAt", "dimensions", "propositionScores"}, where
  propositionScores is {id: score} or {dimension: {id: score}}.

The agent named inside must match the file name, and the setup that produced the scores (judge,
proposition sets, window) is kept, so that a baseline from another setup is not compared by accident:
`setup_mismatches` names every difference, and a baseline that does not record a part of its setup
is not taken to match it.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluation.errors import FieldProblem, InvalidInput


@dataclass(frozen=True)
class JudgeConfig:
    """The judge configuration behind a score: provider, model and the judge prompt's version ("" when unknown)."""

    provider: str
    model: str = ""
    prompt: str = ""

    @property
    def name(self) -> str:
        """provider/model."""
        return "/".join(part for part in (self.provider, self.model) if part)

    @property
    def label(self) -> str:
        """provider/model (prompt <version>)."""
        return f"{self.name} (prompt {self.prompt})" if self.prompt else self.name

    @classmethod
    def from_label(cls, label: str, prompt: str = "") -> "JudgeConfig":
        provider, _, model = label.partition("/")
        return cls(provider, model, prompt)

    @property
    def unrecorded(self) -> list[str]:
        """The parts of the configuration this record leaves out."""
        parts = (("provider", self.provider), ("model", self.model), ("judge prompt version", self.prompt))
        return [name for name, value in parts if not value]


@dataclass(frozen=True)
class Setup:
    """What a drift score depends on besides the agent's messages: the judge configuration, the version of
    each dimension's proposition set (the rubric) and the window (the most recent messages judged). A
    baseline is comparable only when it recorded the same setup."""

    judge: JudgeConfig
    rubric: dict[str, str]
    """Dimension -> the version (a hash) of the propositions the agent is scored with."""
    max_messages: int
    """The most recent messages of the agent that are judged (drift's counterpart of max turns)."""


@dataclass(frozen=True)
class Baseline:
    agent_id: str
    dimensions: dict[str, float]
    proposition_scores: dict[str, float] = field(default_factory=dict)
    """"dimension/proposition id" (or a bare proposition id, from a flat file) -> its effective 0-9 score."""
    judge: JudgeConfig | None = None
    mode: str = ""
    captured_at: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)
    """Dimension -> the scores of each repeat, when captured with repeats."""
    path: str = ""
    rubric: dict[str, str] = field(default_factory=dict)
    """Dimension -> the version of its proposition set when the baseline was captured ({} when not recorded)."""
    max_messages: int | None = None
    """The window the baseline was captured with (None when not recorded)."""

    @property
    def has_scores(self) -> bool:
        return bool(self.dimensions or self.proposition_scores)


def setup_mismatches(baseline: Baseline, setup: Setup) -> list[str]:
    """Every way the baseline's recorded setup differs from this run's ([] when comparable). A part the
    baseline does not record counts as a difference: it cannot be shown to match."""
    reasons: list[str] = []
    judge = baseline.judge
    if judge is None:
        reasons.append(f"the baseline does not record which judge scored it (this run's judge is {setup.judge.label})")
    elif judge.unrecorded or judge != setup.judge:
        note = f", and does not record its {', '.join(judge.unrecorded)}" if judge.unrecorded else ""
        reasons.append(
            f"the baseline was scored by {judge.label or '?'}{note} (this run's judge is {setup.judge.label})"
        )
    if not baseline.rubric:
        reasons.append("the baseline does not record the versions of its proposition sets (rubric)")
    else:
        scored = {key.partition("/")[0] for key in baseline.proposition_scores if "/" in key} | set(baseline.dimensions)
        for dimension in sorted(scored - set(baseline.rubric)):
            reasons.append(f"the baseline does not record the version of the {dimension} propositions")
        for dimension in sorted(set(baseline.rubric) & set(setup.rubric)):
            if baseline.rubric[dimension] != setup.rubric[dimension]:
                reasons.append(
                    f"the {dimension} propositions changed (rubric {baseline.rubric[dimension]} in the baseline, "
                    f"{setup.rubric[dimension]} now)"
                )
    if baseline.max_messages is None:
        reasons.append("the baseline does not record its window (max_messages)")
    elif baseline.max_messages != setup.max_messages:
        reasons.append(
            f"the baseline judged the last {baseline.max_messages} messages, this run the last {setup.max_messages}"
        )
    return reasons


def baseline_file(folder: Path, agent_id: str) -> Path:
    return folder / f"{agent_id}.json"


def _number(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("score", value.get("mean"))
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _scores(raw: Any, label: str, field_name: str) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidInput([FieldProblem(field_name, "must be an object of scores", label)])
    out: dict[str, float] = {}
    for key, value in raw.items():
        if isinstance(value, dict) and field_name == "propositionScores" and _number(value) is None:
            nested = _scores(value, label, f"{field_name}.{key}")  # {dimension: {id: score}}
            out.update({f"{key}/{pid}": score for pid, score in nested.items()})
            continue
        number = _number(value)
        if number is None or not 0 <= number <= 9:
            raise InvalidInput([FieldProblem(f"{field_name}.{key}", f"{value!r} is not a score from 0 to 9", label)])
        out[key] = number
    return out


def read_baseline(folder: Path, agent_id: str) -> Baseline | None:
    """The agent's baseline, None when it has none; InvalidInput names the file and field when it is wrong."""
    path = baseline_file(folder, agent_id)
    if not path.is_file():
        return None
    label = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput([FieldProblem("", f"not valid JSON ({exc})", label)]) from None
    if not isinstance(doc, dict):
        raise InvalidInput([FieldProblem("(document)", "must be an object", label)])
    named = doc.get("agentId", doc.get("agent"))
    if named is not None and named != agent_id:
        key = "agentId" if "agentId" in doc else "agent"
        raise InvalidInput([FieldProblem(key, f"{named!r} does not match the file name ({agent_id})", label)])
    judge = doc.get("judge")
    config = None
    if isinstance(judge, dict):
        config = JudgeConfig(str(judge.get("provider", "")), str(judge.get("model", "")), str(judge.get("prompt", "")))
    elif isinstance(judge, str) and judge:
        config = JudgeConfig.from_label(judge)
    elif doc.get("judge_model"):
        config = JudgeConfig("", str(doc["judge_model"]))
    raw_rubric = doc.get("rubric")
    if raw_rubric is not None and not (
        isinstance(raw_rubric, dict) and all(isinstance(v, str) and v for v in raw_rubric.values())
    ):
        raise InvalidInput(
            [FieldProblem("rubric", "must be an object of dimension: version (a non-empty string)", label)]
        )
    window = doc.get("max_messages")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise InvalidInput([FieldProblem("max_messages", f"{window!r} is not a whole number of 1 or more", label)])
    raw_samples = doc.get("samples")
    samples: dict[str, Any] = raw_samples if isinstance(raw_samples, dict) else {}
    return Baseline(
        agent_id=agent_id,
        dimensions=_scores(doc.get("dimensions"), label, "dimensions"),
        proposition_scores=_scores(
            doc.get("propositionScores", doc.get("proposition_scores")), label, "propositionScores"
        ),
        judge=config,
        mode=str(doc.get("mode", "")),
        captured_at=str(doc.get("capturedAt", doc.get("captured_at", doc.get("created_at", "")))),
        samples={k: [float(x) for x in v] for k, v in samples.items() if isinstance(v, list)},
        path=label,
        rubric=dict(raw_rubric or {}),
        max_messages=window,
    )


def write_baseline(
    folder: Path,
    *,
    agent_id: str,
    dimensions: dict[str, float],
    proposition_scores: dict[str, dict[str, float]],
    judge: JudgeConfig,
    mode: str,
    captured_at: str,
    sample_size: int,
    rubric: dict[str, str],
    max_messages: int,
    samples: dict[str, list[float]] | None = None,
) -> Path:
    path = baseline_file(folder, agent_id)
    folder.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "agent": agent_id,
        "captured_at": captured_at,
        "judge": {"provider": judge.provider, "model": judge.model, "prompt": judge.prompt},
        "rubric": rubric,
        "max_messages": max_messages,
        "mode": mode,
        "sample_size": sample_size,
        "dimensions": dimensions,
        "proposition_scores": proposition_scores,
    }
    if samples and any(len(v) > 1 for v in samples.values()):
        doc["samples"] = samples
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path
