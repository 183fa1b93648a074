"""Which vendor serves a role: CLI override, then the database's LLMConfig, then environment, then offline."""

import hashlib
import importlib
import json
import os
import threading
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import urllib3

from evaluation.conf import setting
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.providers.base import ROLES, GenerateSettings, MissingKeyError, Provider


@dataclass(frozen=True)
class Vendor:
    """One vendor: the class that speaks its wire format (imported on first use) and the key it needs."""

    name: str
    provider_class: str
    key_env: str = ""
    """The environment variable holding its API key ("" when it needs none)."""


VENDORS: dict[str, Vendor] = {
    v.name: v
    for v in (
        Vendor("openai", "evaluation.providers.openai_api.OpenAIProvider", "OPENAI_API_KEY"),
        Vendor("anthropic", "evaluation.providers.anthropic_api.AnthropicProvider", "ANTHROPIC_API_KEY"),
        Vendor("anthropic-haiku", "evaluation.providers.anthropic_api.AnthropicHaikuProvider", "ANTHROPIC_API_KEY"),
        Vendor("offline", "evaluation.providers.offline.OfflineProvider"),
        Vendor("replay", "evaluation.providers.replay.ReplayProvider"),
    )
}
"""The one list of vendors: the admin's choices and the key variables derive from it."""


def vendor_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in VENDORS]


# Output-relevant defaults per role (spec 001: the judge reasons hard; the student is brief).
ROLE_SETTINGS: dict[str, GenerateSettings] = {
    "simulator": GenerateSettings(max_tokens=300, temperature=0.9),
    "tutor": GenerateSettings(max_tokens=600, temperature=0.7),
    "judge": GenerateSettings(max_tokens=6000, reasoning_effort="high", thinking_budget=20000),
    "proposition_judge": GenerateSettings(max_tokens=4000, temperature=0.0),
    "gate": GenerateSettings(max_tokens=200, temperature=0.0),
    "suite_agent": GenerateSettings(max_tokens=2000),
    "suite_judge": GenerateSettings(max_tokens=1500, temperature=0.0),
    "rubric_judge": GenerateSettings(max_tokens=2000, temperature=0.0),
}
SETTING_OPTIONS = ("max_tokens", "temperature", "reasoning_effort", "thinking_budget", "seed")


@dataclass(frozen=True)
class ProviderSpec:
    """A resolved choice of vendor for one role, and where it came from."""

    provider: str
    model: str = ""
    base_url: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    source: str = "default"

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}" if self.model else self.provider

    @classmethod
    def parse(cls, value: str, *, source: str = "override") -> "ProviderSpec":
        """'openai', 'anthropic/claude-sonnet-4-6', 'anthropic:claude-sonnet-4-6' (spec 003's URIs) or
        'openai/llama3@http://localhost:11434/v1'; a ValueError names the vendors on offer."""
        text = (value or "").strip()
        base_url = ""
        if "@" in text:
            text, base_url = text.split("@", 1)
            if not base_url.startswith(("http://", "https://")):
                raise ValueError(f"{value!r}: the part after '@' must be an http(s) URL")
            check_base_url(base_url)
        cut = min((i for i in (text.find("/"), text.find(":")) if i >= 0), default=len(text))
        provider, model = text[:cut], text[cut + 1 :]
        if provider not in VENDORS:
            raise ValueError(f"unknown provider {provider!r} in {value!r}; choose from {', '.join(VENDORS)}")
        return cls(provider=provider, model=model, base_url=base_url, source=source)


def resolve(role: str, override: str | ProviderSpec | None = None) -> ProviderSpec:
    if role not in ROLES:
        raise ValueError(f"unknown LLM role {role!r}; roles are {', '.join(ROLES)}")
    if override:
        return override if isinstance(override, ProviderSpec) else ProviderSpec.parse(override)
    from evaluation.models import LLMConfig

    row = LLMConfig.objects.filter(role=role).first()
    if row is not None:
        return ProviderSpec(row.provider, row.model, row.base_url, dict(row.options or {}), source="database")
    return resolve_without_db(role)


TUTOR_PROVIDER_ENV = ("TUTOR_LLM_PROVIDER", "APP_LLM_PROVIDER")
"""Spec 001's variables for the tutor's provider (TUTOR_LLM_PROVIDER, falling back to APP_LLM_PROVIDER):
the reference tutor uses it, and a tutor that does not report its model is labelled with it."""


def tutor_provider_env() -> tuple[str, str]:
    """(the value, the variable) of the first of TUTOR_PROVIDER_ENV that is set; ("", "") when none is."""
    for name in TUTOR_PROVIDER_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            return value, name
    return "", ""


def resolve_without_db(role: str) -> ProviderSpec:
    """Environment, then offline: for callers with no database (pytest items of EVAL.md suites).

    A role's own EVAL_<ROLE>_PROVIDER comes first; the tutor's then spec 001's TUTOR_LLM_PROVIDER and
    APP_LLM_PROVIDER; then EVAL_LLM_PROVIDER for every role."""
    env_role = role.upper()
    provider = (
        os.environ.get(f"EVAL_{env_role}_PROVIDER")
        or (tutor_provider_env()[0] if role == "tutor" else "")
        or os.environ.get("EVAL_LLM_PROVIDER")
    )
    if provider:
        spec = ProviderSpec.parse(provider, source="environment")
        model = os.environ.get(f"EVAL_{env_role}_MODEL") or os.environ.get("EVAL_LLM_MODEL") or spec.model
        return replace(spec, model=model, source="environment")
    return ProviderSpec("offline", source="default")


def missing_key(spec: ProviderSpec) -> str | None:
    """The environment variable this spec needs and lacks, if any (a custom base URL needs none)."""
    env = VENDORS[spec.provider].key_env
    if not env or spec.base_url or os.environ.get(env):
        return None
    return env


def check_base_url(url: str) -> None:
    """Refuse a base URL that HTTP clients could read two ways, and one whose host is not in
    EVAL_ALLOWED_BASE_URL_HOSTS (when that list is set).

    The host checked must be the host called: urllib3 (chat with compatible servers) ends the host at
    a backslash where urlsplit does not, so `http://127.0.0.1:9\\@llm.internal/v1` would pass the
    check as llm.internal and reach 127.0.0.1. A backslash, whitespace or a control character is
    refused, and so is a URL whose host urllib3 reads differently."""
    odd = next((c for c in url if c == "\\" or c.isspace() or ord(c) < 32 or ord(c) == 127), None)
    if odd is not None:
        raise ValueError(f"{url!r}: a base URL may not contain {odd!r}")
    try:
        host = urlsplit(url).hostname or ""
        called = (urllib3.util.parse_url(url).host or "").strip("[]").lower()
    except ValueError as exc:  # urllib3's LocationParseError is one
        raise ValueError(f"{url!r}: not a URL ({exc})") from None
    if called != host:
        raise ValueError(f"{url!r}: its host reads as {host!r} or as {called!r}; write it plainly")
    allowed = setting("ALLOWED_BASE_URL_HOSTS")
    if allowed and host not in allowed:
        raise ValueError(f"{url!r}: host {host!r} is not in EVAL_ALLOWED_BASE_URL_HOSTS ({', '.join(allowed)})")


def allowed_env_value(name: str, *, destination: str) -> str:
    """The value of an environment variable that is about to leave for `destination`; only variables
    named in EVAL_ALLOWED_KEY_VARS may (an agent's auth_header naming DJANGO_SECRET_KEY must not)."""
    if name not in setting("ALLOWED_KEY_VARS"):
        raise MissingKeyError(f"{name} may not be sent to {destination}: it is not in EVAL_ALLOWED_KEY_VARS")
    return os.environ.get(name, "")


def _stored_credential(base_url: str) -> str | None:
    from django.db import DatabaseError

    from evaluation.models import EndpointCredential

    try:
        return EndpointCredential.objects.filter(base_url=base_url).values_list("api_key", flat=True).first()
    except (DatabaseError, RuntimeError):  # no database here (pytest items of EVAL.md suites)
        return None


def api_key_for(spec: ProviderSpec) -> tuple[str | None, str]:
    """(the key this spec's requests carry, where it comes from).

    A vendor's key from the environment goes only to that vendor's own endpoint. A base URL typed
    by staff gets the credential stored for it in the admin, else the variable its options name in
    {"key_env": NAME} when EVAL_ALLOWED_KEY_VARS allows it, else no key.
    """
    vendor = VENDORS[spec.provider]
    if not vendor.key_env:
        return None, ""
    if not spec.base_url:
        return os.environ.get(vendor.key_env) or None, vendor.key_env
    stored = _stored_credential(spec.base_url)
    if stored:
        return stored, f"the endpoint credential for {spec.base_url} (admin)"
    named = str(spec.options.get("key_env") or "")
    if named:
        if named not in setting("ALLOWED_KEY_VARS"):
            raise MissingKeyError(
                f"{spec.provider}: {named} may not be sent to {spec.base_url}: it is not in EVAL_ALLOWED_KEY_VARS"
            )
        return os.environ.get(named) or None, named
    return None, f"an endpoint credential for {spec.base_url} (admin), or options key_env in EVAL_ALLOWED_KEY_VARS"


def require_keys(roles: list[str], override: str | None = None) -> list[str]:
    """Every problem with keys for these roles, as messages naming the variable, and every generation setting
    a role's LLM config sets that its model does not take (capabilities.setting_problems); [] when none."""
    from evaluation.providers.capabilities import setting_problems

    problems = []
    for role in roles:
        spec = resolve(role, override)
        env = missing_key(spec)
        if env:
            problems.append(f"role {role!r} uses {spec.label} ({spec.source}) but {env} is not set")
        model = spec.model or getattr(_provider_class(spec.provider), "default_model", "")
        problems += [
            f"role {role!r}: {problem}"
            for problem in setting_problems(spec.provider, model, spec.options, base_url=spec.base_url)
        ]
    return problems


def _provider_class(name: str) -> Any:
    module_name, _, class_name = VENDORS[name].provider_class.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name)


def preload() -> None:
    """Import every vendor's module now (a worker at start), and make one provider of each vendor that
    calls out: the openai package alone takes seconds to import, and the SDKs import their HTTP
    transport (httpcore) only when their first client is made. A worker's first run would otherwise
    wait for both. The providers made here (at the vendor's own endpoint, so with its SDK client)
    send nothing and are dropped."""
    for vendor in VENDORS.values():
        module_name, _, class_name = vendor.provider_class.rpartition(".")
        cls = getattr(importlib.import_module(module_name), class_name)
        if vendor.key_env:
            cls(model=cls.default_model, base_url="", options={}, api_key="preload", key_hint="")


def keys_check(roles: list[str], override: str | None, *, field: str) -> None:
    """Refuse a run start whose roles (with this override, else their configured providers) would need a
    vendor key that is not set, or name an unknown provider: InvalidInput on `field`, naming the variable.

    Every room's start service calls it, so every door (API 400, dashboard, admin, CLI) refuses alike.
    """
    try:
        missing = require_keys(roles, override or None)
    except ValueError as exc:  # an unknown provider: the message names the vendors on offer
        raise InvalidInput([FieldProblem(field, str(exc))]) from None
    if missing:
        raise InvalidInput([FieldProblem(field, problem) for problem in missing])


_INSTANCES: dict[str, Provider] = {}
_INSTANCES_LOCK = threading.Lock()


def build(spec: ProviderSpec) -> Provider:
    """Import the vendor's module (only now) and construct it, once per configuration.

    Vendor clients are thread-safe and costly to make (an HTTP pool and a TLS context: ~20 ms),
    so every role with the same configuration and key shares one.
    """
    env = missing_key(spec)
    if env:
        raise MissingKeyError(f"{spec.provider}: set {env} to use this provider")
    if spec.base_url:
        try:
            check_base_url(spec.base_url)
        except ValueError as exc:
            raise MissingKeyError(f"{spec.provider}: {exc}") from None
    api_key, hint = api_key_for(spec)
    fingerprint = hashlib.sha256((api_key or "").encode()).hexdigest()
    key = json.dumps([spec.provider, spec.model, spec.base_url, spec.options, fingerprint], sort_keys=True, default=str)
    with _INSTANCES_LOCK:
        if key not in _INSTANCES:
            module_name, _, class_name = VENDORS[spec.provider].provider_class.rpartition(".")
            cls = getattr(importlib.import_module(module_name), class_name)
            _INSTANCES[key] = cls(
                model=spec.model, base_url=spec.base_url, options=spec.options, api_key=api_key, key_hint=hint
            )
        return _INSTANCES[key]


def settings_for(role: str, spec: ProviderSpec, **overrides: Any) -> GenerateSettings:
    """The role's defaults, then the config's options, then the caller's overrides."""
    values = {k: v for k, v in spec.options.items() if k in SETTING_OPTIONS}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return replace(ROLE_SETTINGS.get(role, GenerateSettings()), **values)
