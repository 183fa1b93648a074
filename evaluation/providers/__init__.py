"""LLM access: one interface over OpenAI, Anthropic, OpenAI-compatible servers, offline and replay."""

from evaluation.providers.accounting import Meter, estimate_cost
from evaluation.providers.base import (
    ROLES,
    AuthError,
    CostLimitReached,
    GenerateSettings,
    InvalidJSONError,
    LLMResult,
    Message,
    MissingKeyError,
    ProviderError,
    ReplayMiss,
    Usage,
)
from evaluation.providers.client import LLM, get_llm
from evaluation.providers.registry import (
    VENDORS,
    ProviderSpec,
    allowed_env_value,
    keys_check,
    require_keys,
    resolve,
    vendor_choices,
)

__all__ = [
    "LLM",
    "ROLES",
    "VENDORS",
    "AuthError",
    "CostLimitReached",
    "GenerateSettings",
    "InvalidJSONError",
    "LLMResult",
    "Message",
    "Meter",
    "MissingKeyError",
    "ProviderError",
    "ProviderSpec",
    "ReplayMiss",
    "Usage",
    "allowed_env_value",
    "estimate_cost",
    "get_llm",
    "keys_check",
    "require_keys",
    "resolve",
    "vendor_choices",
]
