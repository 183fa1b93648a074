"""Refuse a start whose LLM roles would need a vendor key that is not set, naming the variable.

The rooms' start services are the right home for this check (every door would then get it);
until they have it, the API checks here, in its input validation, before it calls them.
"""

from rest_framework import serializers

from evaluation.providers import require_keys


def provider_keys_check(roles: list[str], provider: str | None, *, field: str) -> None:
    """ValidationError on `field` when any role (with this override, else its configured provider) lacks its key."""
    try:
        missing = require_keys(roles, provider or None)
    except ValueError as exc:  # an unknown provider: the message names the vendors on offer
        raise serializers.ValidationError({field: [str(exc)]}) from None
    if missing:
        raise serializers.ValidationError({field: missing})
