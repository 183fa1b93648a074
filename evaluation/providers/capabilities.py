"""What each vendor's models take, under the API version the installed SDK speaks: the sampling parameters,
thinking or reasoning, a seed, prompt caching (the shortest prompt a vendor caches, the cache lifetimes on
offer, how many breakpoints a request may set).

Requests are built from this table (a setting a model does not take is not sent), and a role whose LLM
config sets such a setting is refused when its run starts, naming the setting and why, instead of by a
400 in the middle of the run. Whether a request field exists at all comes from the installed SDK's own
request type (sdk_types): anthropic 2.12.0 speaks API version 2026-10-21, whose MessageCreateParams has
no temperature, so no Anthropic request carries one.
"""

import functools
from dataclasses import dataclass

from evaluation.providers.sdk_types import declared_keys

ANTHROPIC_MIN_CACHE = (
    # (model name prefix, the shortest prompt prefix it caches, in tokens): Anthropic's prompt-caching
    # documentation, "Cache limitations".
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 1024),
    ("claude-sonnet-4-5", 1024),
    ("claude-opus-4-1", 1024),
    ("claude-opus-4", 1024),
    ("claude-sonnet-4", 1024),
    ("claude-haiku-3-5", 2048),
    ("claude-3-5-haiku", 2048),
)
ANTHROPIC_DEFAULT_MIN_CACHE = 1024
"""A Claude model the table does not name: the smallest minimum the vendor documents."""
OPENAI_MIN_CACHE = 1024
"""OpenAI caches a prompt from 1,024 tokens on, in blocks of 1,024 (every model)."""
OPENAI_PLAIN_PREFIXES = ("gpt-4", "gpt-3.5", "chatgpt-4o")
"""OpenAI models that do not reason (take no reasoning.effort); the others (gpt-5*, o-series, a name this
table does not know) take a reasoning effort, and then no temperature."""


@dataclass(frozen=True)
class Terms:
    """What one model takes, as sent through one API."""

    api: str
    """"anthropic", "responses" or "chat" (OpenAI's, or an OpenAI-compatible server's)."""
    temperature: bool
    """It takes a temperature (with reasoning_effort set, an OpenAI reasoning model does not)."""
    temperature_with_reasoning: bool
    seed: bool
    thinking_budget: bool
    """Anthropic's extended thinking with a token budget (at least 1,024)."""
    reasoning_effort: bool
    min_cache_tokens: int
    """The shortest prompt prefix the vendor caches (0: no prompt caching)."""
    cache_ttls: tuple[str, ...] = ()
    """The cache lifetimes a request may ask for (Anthropic's "5m" and "1h")."""
    max_breakpoints: int = 0
    """How many cache breakpoints one request may set."""

    def takes(self, setting: str, *, reasoning: bool = False) -> bool:
        """Whether a generation setting (GenerateSettings' field name) is sent to this model."""
        if setting == "temperature":
            return self.temperature and (self.temperature_with_reasoning or not reasoning)
        if setting == "max_tokens":
            return True
        return bool(getattr(self, setting, False))


@functools.cache
def _anthropic_fields() -> frozenset[str]:
    return declared_keys("messages")


@functools.cache
def _cache_ttls() -> tuple[str, ...]:
    import typing

    from anthropic.types.cache_control_ephemeral_param import CacheControlEphemeralParam

    from evaluation.providers.sdk_types import fields_of

    hint = fields_of(CacheControlEphemeralParam)[0].get("ttl")
    return tuple(typing.get_args(hint)) if hint is not None else ("5m",)


def anthropic_min_cache(model: str) -> int:
    """The shortest prompt prefix Anthropic caches for this model, in tokens."""
    return next(
        (tokens for prefix, tokens in ANTHROPIC_MIN_CACHE if model.startswith(prefix)), ANTHROPIC_DEFAULT_MIN_CACHE
    )


def terms_for(provider: str, model: str, *, api: str = "", base_url: str = "") -> Terms:
    """The terms of a provider's model ("anthropic"/"anthropic-haiku", "openai" with its api)."""
    if provider.startswith("anthropic"):
        fields = _anthropic_fields()
        return Terms(
            api="anthropic",
            temperature="temperature" in fields,
            temperature_with_reasoning=False,  # extended thinking takes no temperature
            seed=False,
            thinking_budget="thinking" in fields,
            reasoning_effort=False,
            min_cache_tokens=anthropic_min_cache(model),
            cache_ttls=_cache_ttls(),
            max_breakpoints=4,
        )
    if provider == "openai":
        api = api or ("chat" if base_url else "responses")
        fields = declared_keys(api)
        if api == "chat" and base_url:
            # An OpenAI-compatible server (Ollama, vLLM, llama.cpp): sampling and a seed, no reasoning knob.
            return Terms("chat", True, True, True, False, False, 0)
        reasoning = not model.startswith(OPENAI_PLAIN_PREFIXES)
        return Terms(
            api=api,
            temperature="temperature" in fields,
            temperature_with_reasoning=False,
            seed="seed" in fields,
            thinking_budget=False,
            reasoning_effort=reasoning and api == "responses",
            min_cache_tokens=OPENAI_MIN_CACHE,
        )
    # offline and replay send nothing: they take every setting.
    return Terms(provider, True, True, True, True, True, 0)


SETTING_REASONS = {
    "temperature": "temperature",
    "thinking_budget": "thinking budget (Anthropic's extended thinking)",
    "reasoning_effort": "reasoning effort (OpenAI's reasoning models)",
}
"""The settings a run refuses to start with where its model does not take them. A seed is not among them:
a run records whether its seed was sent (Provider.takes_seed), as the Responses API has none."""


def setting_problems(provider: str, model: str, options: dict[str, object], *, base_url: str = "") -> list[str]:
    """Why settings an LLM config sets explicitly cannot be sent to its model ([] when all can): a run
    that would send them is refused at its start."""
    api = str(options.get("api") or "")
    terms = terms_for(provider, model, api=api, base_url=base_url)
    reasoning = bool(options.get("reasoning_effort"))
    label = f"{provider}/{model}" if model else provider
    problems = []
    for setting, what in SETTING_REASONS.items():
        if options.get(setting) is None or terms.takes(setting, reasoning=reasoning):
            continue
        if setting == "temperature" and terms.temperature:
            why = "not together with reasoning_effort"
        elif terms.api == "anthropic" and setting == "temperature":
            why = "the Messages API version the installed anthropic SDK speaks has no temperature parameter"
        else:
            why = f"the {terms.api} API does not take it for this model"
        problems.append(f"{label} takes no {what} ({why}): remove {setting!r} from the LLM config's options")
    budget = options.get("thinking_budget")
    if terms.thinking_budget and isinstance(budget, int) and not isinstance(budget, bool) and 0 < budget < 1024:
        problems.append(f"{label}: thinking_budget must be at least 1024 tokens, not {budget}")
    return problems
