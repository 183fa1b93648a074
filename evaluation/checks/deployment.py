"""Checks of a production deployment (`check --deploy`)."""

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

HOW_TO_MAKE_A_KEY = 'make one with: python -c "import secrets; print(secrets.token_urlsafe(50))"'

# The example values the documentation and the compose file show in place of a real key.
PLACEHOLDER_KEYS = frozenset(
    {
        "replace-with-the-output-of-python-c-import-secrets-print-secrets-token-urlsafe-50",
        "...",
    }
)
PLACEHOLDER_MARKERS = ("replace-with", "change-me", "changeme", "your-secret-key", "secret-key-here")


def is_placeholder_key(key: str) -> bool:
    """Whether the key is one of the documented examples (or reads like one) rather than a made key."""
    lowered = key.strip().lower()
    return lowered in PLACEHOLDER_KEYS or any(marker in lowered for marker in PLACEHOLDER_MARKERS)


@register(deploy=True)
def check_secret_key_not_placeholder(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The documented placeholder signs nothing safely: anyone who read the docs could forge sessions and tokens.

    Django's own W009 already refuses short and low-entropy keys; this check refuses the example text.
    """
    keys = [("SECRET_KEY", str(getattr(settings, "SECRET_KEY", "") or ""))]
    keys += [("SECRET_KEY_FALLBACKS", str(k)) for k in getattr(settings, "SECRET_KEY_FALLBACKS", []) or []]
    return [
        Error(
            f"{name} (DJANGO_SECRET_KEY) is the documentation's placeholder, not a secret; {HOW_TO_MAKE_A_KEY}",
            hint="Give the same made key to the web process and every worker, and keep it out of the repository.",
            id="evaluation.deploy.E001",
        )
        for name, key in keys
        if is_placeholder_key(key)
    ]
