"""One accessor for the app's settings dict (settings.EVALUATION), with defaults."""

from typing import Any

from django.conf import settings


def setting(name: str) -> Any:
    """Return EVALUATION[name]; a KeyError names the missing setting."""
    try:
        return settings.EVALUATION[name]
    except KeyError:
        raise KeyError(f"settings.EVALUATION has no {name!r}") from None
