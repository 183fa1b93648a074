"""The rubric judge: one call per item and repeat, a prompt built from the rubric, scores stored per
judge configuration (provider/model + prompt hash + rubric version). Real sessions are framed as
real: the prompt claims no persona and no simulation."""

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from evaluation.judging.offline import DimensionScale, RubricJudgeRule
from evaluation.judging.values import RubricSpec
from evaluation.models import CanarySet, Item, JudgeConfiguration, JudgeScore
from evaluation.providers import LLM, Message, ProviderError, get_llm

ROLE = "rubric_judge"
USER_TEMPLATE_VERSION = "1"
"""Bump when build_user_message changes what the judge reads: it is part of the prompt hash."""


@dataclass(frozen=True)
class ItemInput:
    """What the judge reads of one item, loaded before the calls so the workers never touch the database."""

    item_id: int
    messages: tuple[tuple[str, str], ...]
    response: str
    topic: str = ""


@dataclass(frozen=True)
class JudgeReport:
    """What one judging pass did."""

    configuration: str
    """The judge configuration key."""
    judged: int
    """Items x repeats judged now."""
    skipped: int
    """Already judged under this configuration."""
    failed: tuple[str, ...]
    """One line per call that failed (item and reason); the others are stored."""
    canary_items: int
    """Canary items judged first (0 when the configuration had already judged them)."""
    seconds: float

    def __str__(self) -> str:
        fails = f", {len(self.failed)} failed" if self.failed else ""
        canary = f"; canary: {self.canary_items} items first" if self.canary_items else ""
        return f"{self.configuration}: {self.judged} judged, {self.skipped} already judged{fails}{canary} ({self.seconds:.1f} s)"


def render_dimensions(spec: RubricSpec) -> str:
    parts = []
    for dim in spec.dimensions:
        if dim.scale.integer:
            scale = f"Scale: an integer from {dim.scale.levels[0]} (worst) to {dim.scale.levels[-1]} (best)."
        else:
            scale = "Scale, best first: " + " | ".join(reversed(dim.scale.levels)) + "."
        lines = [f"## {dim.name}: {dim.question}", scale]
        lines += [f"- {level}: {meaning}" for level, meaning in dim.anchors]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def system_prompt(spec: RubricSpec) -> str:
    return spec.judge_prompt.replace("{dimensions}", render_dimensions(spec))


def schema(spec: RubricSpec) -> dict[str, Any]:
    def value(dim: Any) -> dict[str, Any]:
        if dim.scale.integer:
            return {"type": "integer", "minimum": int(dim.scale.levels[0]), "maximum": int(dim.scale.levels[-1])}
        return {"enum": list(reversed(dim.scale.levels))}

    names = [d.name for d in spec.dimensions]
    return {
        "type": "object",
        "required": ["scores"],
        "properties": {
            "scores": {
                "type": "object",
                "required": names,
                "properties": {
                    d.name: {
                        "type": "object",
                        "required": ["value"],
                        "properties": {"value": value(d), "rationale": {"type": "string"}},
                    }
                    for d in spec.dimensions
                },
            }
        },
    }


def build_user_message(spec: RubricSpec, item: ItemInput) -> str:
    transcript = "\n".join(
        f"[Turn {n}] {role.upper()}: {content}" for n, (role, content) in enumerate(item.messages, start=1)
    )
    topic = [f"# Topic\n{item.topic}", ""] if item.topic else []
    if spec.unit == "response":
        return "\n".join([*topic, "# Conversation so far", transcript, "", "# Candidate tutor response", item.response])
    return "\n".join([*topic, "# Transcript", transcript])


def prompt_hash(spec: RubricSpec) -> str:
    body = json.dumps([system_prompt(spec), schema(spec), USER_TEMPLATE_VERSION, spec.unit], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def configuration_key(llm: LLM, spec: RubricSpec) -> str:
    where = f"@{llm.spec.base_url}" if llm.spec.base_url else ""
    return f"{llm.label}{where} | prompt {prompt_hash(spec)[:12]} | {spec.slug} v{spec.version}"


def configuration_for(llm: LLM, spec: RubricSpec) -> tuple[JudgeConfiguration, bool]:
    key = configuration_key(llm, spec)
    return JudgeConfiguration.objects.get_or_create(
        key=key,
        defaults={
            "rubric_id": spec.id,
            "provider": llm.label,
            "prompt_hash": prompt_hash(spec),
            "rubric_version": spec.version,
        },
    )


def judge_one(llm: LLM, spec: RubricSpec, item: ItemInput, repeat: int) -> dict[str, tuple[str, float, str]]:
    """{dimension: (level, score, rationale)} for one item in one repeat; raises ProviderError."""
    rule = RubricJudgeRule(
        dimensions=tuple(DimensionScale(d.name, d.scale.levels, d.scale.integer) for d in spec.dimensions),
        messages=item.messages,
        response=item.response if spec.unit == "response" else "",
    )
    result = llm.call(
        [Message("system", system_prompt(spec)), Message("user", build_user_message(spec, item))],
        schema=schema(spec),
        offline=rule,
        seed=repeat,
    )
    out = {}
    for dim in spec.dimensions:
        answer = result.data["scores"][dim.name]
        level = dim.scale.level_of(answer["value"])
        if level is None:  # the schema allows only the scale; a vendor ignoring it is a failed call
            raise ProviderError(f"{dim.name}: {answer['value']!r} is not on the scale")
        out[dim.name] = (level, float(dim.scale.score_of(level)), str(answer.get("rationale", ""))[:2000])
    return out


def _inputs(spec: RubricSpec, item_ids: list[int] | None) -> list[ItemInput]:
    items = Item.objects.select_related("transcript", "transcript__topic")
    items = items.filter(key="") if spec.unit == "session" else items.exclude(key="")
    if item_ids is not None:
        items = items.filter(pk__in=item_ids)
    out = []
    for item in items.order_by("pk").iterator(chunk_size=500):
        t = item.transcript
        topic = f"{t.topic.name} (grade {t.topic.grade})" if t.topic else ""
        out.append(ItemInput(item.pk, tuple((m["role"], m["content"]) for m in t.messages), item.response, topic))
    return out


def judge_items(
    spec: RubricSpec,
    *,
    provider: str | None,
    repeats: int,
    workers: int,
    only_missing: bool = True,
    item_ids: list[int] | None = None,
) -> JudgeReport:
    started = time.perf_counter()
    llm = get_llm(ROLE, override=provider or None)
    configuration, _ = configuration_for(llm, spec)
    canary_ids = set(CanarySet.objects.filter(rubric_id=spec.id).values_list("items", flat=True)) - {None}
    wanted = None if item_ids is None else sorted(set(item_ids) | canary_ids)
    inputs = _inputs(spec, wanted)
    done: set[tuple[int, int]] = set()
    if only_missing:
        n_dims = len(spec.dimensions)
        counts: dict[tuple[int, int], int] = {}
        for item_id, repeat in JudgeScore.objects.filter(configuration=configuration).values_list("item_id", "repeat"):
            counts[(item_id, repeat)] = counts.get((item_id, repeat), 0) + 1
        done = {k for k, n in counts.items() if n >= n_dims}
    # The canary goes first: a new configuration's agreement on it is known before the rest is judged.
    inputs.sort(key=lambda i: (i.item_id not in canary_ids, i.item_id))
    jobs = [(item, r) for item in inputs for r in range(1, repeats + 1) if (item.item_id, r) not in done]
    canary_jobs = sum(1 for item, _ in jobs if item.item_id in canary_ids)
    dims = {d.name: d.id for d in spec.dimensions}
    failed: list[str] = []
    pending: list[JudgeScore] = []

    def flush() -> None:
        with transaction.atomic():
            JudgeScore.objects.bulk_create(
                pending,
                batch_size=500,
                update_conflicts=True,
                unique_fields=["item", "dimension", "configuration", "repeat"],
                update_fields=["value", "score", "rationale"],
            )
        pending.clear()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(judge_one, llm, spec, item, r): (item, r) for item, r in jobs}
        for future in as_completed(futures):
            item, r = futures[future]
            try:
                values = future.result()
            except (ProviderError, KeyError, TypeError) as exc:  # a vendor's reply of the wrong shape counts as failed
                failed.append(f"item {item.item_id} repeat {r}: {type(exc).__name__}: {exc}")
                continue
            pending += [
                JudgeScore(
                    item_id=item.item_id,
                    dimension_id=dims[name],
                    configuration=configuration,
                    repeat=r,
                    value=level,
                    score=score,
                    rationale=why,
                )
                for name, (level, score, why) in values.items()
            ]
            if len(pending) >= 2000:
                flush()
    if pending:
        flush()
    return JudgeReport(
        configuration=configuration.key,
        judged=len(jobs) - len(failed),
        skipped=len(inputs) * repeats - len(jobs),
        failed=tuple(failed),
        canary_items=canary_jobs,
        seconds=time.perf_counter() - started,
    )
