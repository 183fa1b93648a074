"""The rubric judge: one call per item and repeat, a prompt built from the rubric, scores stored per
judge configuration (provider/model + prompt hash + rubric version). Real sessions are framed as
real: the prompt claims no persona and no simulation."""

import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from evaluation.judging.offline import DimensionScale, RubricJudgeRule
from evaluation.judging.values import RubricSpec
from evaluation.models import CanarySet, Item, JudgeConfiguration, JudgeScore
from evaluation.providers import LLM, LLMResult, Message, Meter, ProviderError, ProviderSpec, Usage, get_llm
from evaluation.providers.accounting import unpriced
from evaluation.providers.batch import BatchCall, batch_continue, batch_run, job_key, wants_batch
from evaluation.providers.compat import endpoint_name

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
    batch: str | None = None
    """The provider batch that carried the calls (None: direct calls)."""
    retried: int = 0
    """Batch lines that failed and were answered by a direct call."""
    repaired: tuple[str, ...] = ()
    """One line per stored judgement whose reply was not valid JSON as it came and was repaired (item and how)."""
    resumed: bool = False
    """A stored batch was polled again rather than a new one sent."""
    cost_usd: float = 0.0
    """What the calls cost at today's prices: direct calls at the direct price; by batch, batch lines at the
    batch price and retried lines at the direct price. 0 for an unpriced model (see `unpriced`)."""
    batch_pk: int | None = None
    """The stored batch still open when the caller did not wait for it (judge_batch_poll finishes it)."""
    usage: Usage = Usage()
    """The calls made and their tokens (cache reads and writes are parts of input_tokens), repairs included."""
    unpriced: str = ""
    """The judge's model when the price table has no price for it (its cost_usd is then 0, not free)."""

    def cost_text(self) -> str:
        """Calls, tokens (cached apart) and cost, as a line of text."""
        u = self.usage
        price = f"no price for model {self.unpriced}" if self.unpriced else f"${self.cost_usd:.4f}"
        return (
            f"{u.calls} call{'s' if u.calls != 1 else ''}, {u.input_tokens:,} input tokens "
            f"({u.cached_input_tokens:,} cached, {u.cache_write_tokens:,} cache writes), "
            f"{u.output_tokens:,} output tokens, {price}"
        )

    def __str__(self) -> str:
        fails = f", {len(self.failed)} failed" if self.failed else ""
        fails += f", {len(self.repaired)} repaired" if self.repaired else ""
        canary = f"; canary: {self.canary_items} items first" if self.canary_items else ""
        batch = ""
        if self.batch:
            again = ", resumed" if self.resumed else ""
            batch = f"; by {self.batch}{again}, {self.retried} line(s) retried directly"
        return (
            f"{self.configuration}: {self.judged} judged, {self.skipped} already judged{fails}{canary}{batch}; "
            f"{self.cost_text()} ({self.seconds:.1f} s)"
        )


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
    """provider/model[@endpoint] | prompt hash | rubric version: the endpoint by a name that survives a
    restart on another port (keys stored with a local server's full URL stay as they were)."""
    name = endpoint_name(llm.spec.base_url, llm.spec.options)
    where = f"@{name}" if name else ""
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


def judge_call(spec: RubricSpec, item: ItemInput, repeat: int) -> BatchCall:
    """The call that judges one item in one repeat (direct or as a line of a batch)."""
    rule = RubricJudgeRule(
        dimensions=tuple(DimensionScale(d.name, d.scale.levels, d.scale.integer) for d in spec.dimensions),
        messages=item.messages,
        response=item.response if spec.unit == "response" else "",
    )
    return BatchCall(
        messages=(Message("system", system_prompt(spec)), Message("user", build_user_message(spec, item))),
        schema=schema(spec),
        offline=rule,
        settings=(("seed", repeat),),
    )


def judge_read(spec: RubricSpec, data: Any) -> dict[str, tuple[str, float, str]]:
    """{dimension: (level, score, rationale)} from the judge's JSON; raises ProviderError off the scale."""
    out = {}
    for dim in spec.dimensions:
        answer = data["scores"][dim.name]
        level = dim.scale.level_of(answer["value"])
        if level is None:  # the schema allows only the scale; a vendor ignoring it is a failed call
            raise ProviderError(f"{dim.name}: {answer['value']!r} is not on the scale")
        out[dim.name] = (level, float(dim.scale.score_of(level)), str(answer.get("rationale", ""))[:2000])
    return out


def judge_one(llm: LLM, spec: RubricSpec, item: ItemInput, repeat: int) -> dict[str, tuple[str, float, str]]:
    """{dimension: (level, score, rationale)} for one item in one repeat; raises ProviderError."""
    return _judge_one(llm, spec, item, repeat)[0]


def _judge_one(
    llm: LLM, spec: RubricSpec, item: ItemInput, repeat: int
) -> tuple[dict[str, tuple[str, float, str]], str]:
    """judge_one's values and how the reply was repaired ("" when it was valid JSON as it came)."""
    call = judge_call(spec, item, repeat)
    result = llm.call(list(call.messages), schema=call.schema, offline=call.offline, **dict(call.settings))
    return judge_read(spec, result.data), result.repaired


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


def _score_rows(item_id: int, repeat: int, values: dict, dims: dict, configuration: Any) -> list[JudgeScore]:
    """One item's judged values (name -> (level, score, why)) as score rows, one per dimension."""
    return [
        JudgeScore(
            item_id=item_id,
            dimension_id=dims[name],
            configuration=configuration,
            repeat=repeat,
            value=level,
            score=score,
            rationale=why,
        )
        for name, (level, score, why) in values.items()
    ]


def _store_scores(rows: list[JudgeScore]) -> None:
    """Store score rows; a row judged before under the same configuration and repeat is replaced."""
    JudgeScore.objects.bulk_create(
        rows,
        batch_size=500,
        update_conflicts=True,
        unique_fields=["item", "dimension", "configuration", "repeat"],
        update_fields=["value", "score", "rationale"],
    )


def judge_items(
    spec: RubricSpec,
    *,
    provider: str | None,
    repeats: int,
    workers: int,
    only_missing: bool = True,
    item_ids: list[int] | None = None,
    batch: bool | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    wait: bool = True,
) -> JudgeReport:
    """Judge the items (all of the rubric's unit, or item_ids and the canary) `repeats` times each.

    batch: True sends the calls through the vendor's batch API (waiting for it), False calls directly,
    None follows the judge's LLM config (options {"batch": true}). on_progress(done, total) follows
    each poll of a batch."""
    started = time.perf_counter()
    meter = Meter()
    llm = get_llm(ROLE, override=provider or None, meter=meter)
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
    repaired: list[str] = []
    pending: list[JudgeScore] = []

    def flush() -> None:
        with transaction.atomic():
            _store_scores(pending)
        pending.clear()

    if batch or (batch is None and wants_batch(llm)):
        return _judge_by_batch(
            llm, spec, configuration, jobs, inputs, repeats, canary_jobs, started, on_progress=on_progress, wait=wait
        )

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_judge_one, llm, spec, item, r): (item, r) for item, r in jobs}
        for future in as_completed(futures):
            item, r = futures[future]
            try:
                values, repair = future.result()
            except (ProviderError, KeyError, TypeError) as exc:  # a vendor's reply of the wrong shape counts as failed
                failed.append(f"item {item.item_id} repeat {r}: {type(exc).__name__}: {exc}")
                continue
            if repair:
                repaired.append(f"item {item.item_id} repeat {r}: {repair}")
            pending += _score_rows(item.item_id, r, values, dims, configuration)
            if len(pending) >= 2000:
                flush()
    if pending:
        flush()
    return JudgeReport(
        configuration=configuration.key,
        judged=len(jobs) - len(failed),
        skipped=len(inputs) * repeats - len(jobs),
        failed=tuple(failed),
        repaired=tuple(sorted(repaired)),
        canary_items=canary_jobs,
        seconds=time.perf_counter() - started,
        cost_usd=meter.cost_usd,
        usage=meter.usage,
        unpriced=_unpriced(llm, meter.usage),
    )


def _unpriced(llm: LLM, usage: Usage) -> str:
    """The judge's model when calls were made to it and the price table cannot price them."""
    model = llm.provider.model
    return model if usage.calls and unpriced(model, llm.provider.name) else ""


def _judge_by_batch(
    llm: LLM,
    spec: RubricSpec,
    configuration: JudgeConfiguration,
    jobs: list[tuple[ItemInput, int]],
    inputs: list[ItemInput],
    repeats: int,
    canary_jobs: int,
    started: float,
    *,
    on_progress: Callable[[int, int], None] | None,
    wait: bool = True,
) -> JudgeReport:
    """The same judging as one provider batch; a stored batch of the same job is resumed, not sent again.
    wait=False sends it (or polls it once) and leaves the rest to judge_batch_poll."""
    from evaluation.models import ProviderBatch

    targets = {f"item-{item.item_id}-r{r}": [item.item_id, r] for item, r in jobs}
    job = {"configuration": configuration.key, "rubric": spec.slug, "repeats": repeats, "options": llm.spec.options}
    open_batch = _open_batch(llm, job)
    targets_of: dict[str, list[int]] = dict(open_batch.custom_ids) if open_batch is not None else targets
    failed: list[str] = []
    call_for, store = _batch_handlers(spec, configuration, {i.item_id: i for i in inputs}, targets_of, failed)
    outcome = batch_run(
        llm,
        kind=BATCH_KIND,
        job=job,
        targets=targets,
        call_for=call_for,
        store=store,
        on_progress=on_progress,
        wait=wait,
    )
    row = ProviderBatch.objects.filter(kind=BATCH_KIND, job_key=job_key(BATCH_KIND, llm, job)).first()
    waiting = outcome is None and row is not None and row.state in ("submitting", "waiting")
    return JudgeReport(
        configuration=configuration.key,
        judged=0 if outcome is None else len(targets_of) - len(failed),
        skipped=max(len(inputs) * repeats - len(targets_of), 0),
        failed=tuple(failed),
        canary_items=canary_jobs,
        seconds=time.perf_counter() - started,
        batch=None
        if row is None or (outcome is None and not waiting)
        else f"{row.vendor} batch {row.provider_batch_id}" + (f" (waiting: {row.stage_text})" if waiting else ""),
        retried=0 if outcome is None else outcome.retried,
        resumed=bool(outcome and outcome.resumed),
        cost_usd=0.0 if outcome is None else outcome.cost_usd,
        batch_pk=row.pk if waiting and row is not None else None,
        usage=Usage() if outcome is None else outcome.usage,
        unpriced="" if outcome is None else _unpriced(llm, outcome.usage),
    )


def _batch_handlers(
    spec: RubricSpec,
    configuration: JudgeConfiguration,
    by_id: dict[int, ItemInput],
    targets_of: dict[str, list[int]],
    failed: list[str],
) -> tuple[Callable[[list[int]], BatchCall], Callable[[dict[str, LLMResult], dict[str, str]], None]]:
    """A batch line's call (custom id target -> call) and what stores the answers (as the direct path does)."""
    dims = {d.name: d.id for d in spec.dimensions}

    def call_for(target: list[int]) -> BatchCall:
        item_id, repeat = target
        if item_id not in by_id:
            by_id.update({i.item_id: i for i in _inputs(spec, sorted({t[0] for t in targets_of.values()}))})
        return judge_call(spec, by_id[item_id], repeat)

    def store(answers: dict[str, LLMResult], lost: dict[str, str]) -> None:
        rows = []
        for custom_id, result in answers.items():
            item_id, repeat = targets_of[custom_id]
            try:
                values = judge_read(spec, result.data)
            except (ProviderError, KeyError, TypeError) as exc:
                failed.append(f"item {item_id} repeat {repeat}: {type(exc).__name__}: {exc}")
                continue
            rows += _score_rows(item_id, repeat, values, dims, configuration)
        failed.extend(
            f"item {targets_of[cid][0]} repeat {targets_of[cid][1]}: {why}" for cid, why in sorted(lost.items())
        )
        _store_scores(rows)

    return call_for, store


def judge_batch_poll(stored: Any) -> JudgeReport | None:
    """Poll a stored judging batch once (a worker's polling task); when it has ended, store its answers
    as judge_items would. None while it is still open."""
    from evaluation.judging.values import rubric_spec
    from evaluation.models import BatchState, Rubric

    if stored.state not in (BatchState.SUBMITTING, BatchState.WAITING):
        return None
    started = time.perf_counter()
    job = stored.job
    spec = rubric_spec(Rubric.objects.get(slug=job["rubric"]))
    configuration = JudgeConfiguration.objects.get(key=job["configuration"])
    llm = get_llm(ROLE, override=ProviderSpec(stored.vendor, stored.model, stored.base_url, dict(job["options"])))
    failed: list[str] = []
    targets_of = dict(stored.custom_ids)
    call_for, store = _batch_handlers(spec, configuration, {}, targets_of, failed)
    outcome = batch_continue(stored, llm, call_for=call_for, store=store, wait=False)
    if outcome is None:
        return None
    return JudgeReport(
        configuration=configuration.key,
        judged=len(targets_of) - len(failed),
        skipped=0,
        failed=tuple(failed),
        canary_items=0,
        seconds=time.perf_counter() - started,
        batch=f"{stored.vendor} batch {stored.provider_batch_id}",
        retried=outcome.retried,
        resumed=True,
        cost_usd=outcome.cost_usd,
        usage=outcome.usage,
        unpriced=_unpriced(llm, outcome.usage),
    )


BATCH_KIND = "judge_items"


def _open_batch(llm: LLM, job: dict[str, Any]) -> Any:
    from evaluation.models import BatchState, ProviderBatch

    return (
        ProviderBatch.objects.filter(
            kind=BATCH_KIND,
            job_key=job_key(BATCH_KIND, llm, job),
            state__in=(BatchState.SUBMITTING, BatchState.WAITING),
        )
        .order_by("created_at")
        .first()
    )
