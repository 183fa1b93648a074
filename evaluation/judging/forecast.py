"""A judging job's price before it starts: every item's prompt built as the judge builds it, sized, and priced."""

from typing import Any

from evaluation.errors import FieldProblem, InvalidInput
from evaluation.judging.judge import ROLE, _inputs, build_user_message, schema, system_prompt
from evaluation.judging.values import rubric_spec
from evaluation.providers import resolve
from evaluation.providers.base import schema_instruction
from evaluation.providers.forecast import CallPlan, Forecast, estimate_tokens, forecast
from evaluation.providers.registry import settings_for

TYPICAL_TOKENS_PER_DIMENSION = 60
"""A typical reply spends about this much on each dimension: its label or score and a sentence of reason."""
MESSAGE_OVERHEAD = 4


def judging_forecast(
    *, rubric: Any, provider: str | None = None, repeats: int = 1, item_ids: list[int] | None = None
) -> Forecast:
    """Calls, tokens and price of judging the rubric's items (or item_ids) `repeats` times each: one call per
    item and repeat, its input the rubric's system prompt and the item's own text. Nothing is created or sent.
    Low: typical replies; high: every reply at the judge's max_tokens."""
    if not 1 <= repeats <= 20:
        raise InvalidInput([FieldProblem("repeats", "must be from 1 to 20")])
    try:
        role_spec = resolve(ROLE, provider)
    except ValueError as exc:
        raise InvalidInput([FieldProblem("provider", str(exc))]) from None
    spec = rubric_spec(rubric)
    inputs = _inputs(spec, item_ids)
    # The system prompt and the reply's JSON schema go with every call (the schema as an instruction in
    # Anthropic's system prompt, as text.format in OpenAI's request: both are billed as input).
    system = estimate_tokens(system_prompt(spec)) + MESSAGE_OVERHEAD + estimate_tokens(schema_instruction(schema(spec)))
    prompt = sum(system + estimate_tokens(build_user_message(spec, item)) + MESSAGE_OVERHEAD for item in inputs)
    calls = len(inputs) * repeats
    typical = min(TYPICAL_TOKENS_PER_DIMENSION * len(spec.dimensions), settings_for(ROLE, role_spec).max_tokens)
    most = settings_for(ROLE, role_spec).max_tokens
    plan = CallPlan(
        ROLE, role_spec, calls, prompt * repeats, prompt * repeats, typical * calls, most * calls, system * calls
    )
    notes = [
        f"{len(inputs)} item{'s' if len(inputs) != 1 else ''} of rubric {spec.slug} x {repeats} repeat"
        f"{'s' if repeats != 1 else ''}: one call each (a reply that is not valid JSON costs one repair call more).",
        "Items already judged under the same configuration are skipped by the job: this counts every item. The "
        "rubric's instructions are the same on every call, so prompt caching lowers the input's price.",
    ]
    return forecast([plan], notes)
