"""Rate-limit budgets shared by every worker, where no Redis is configured."""

from django.db import models

__all__ = ["RateLimitBudget"]


class RateLimitBudget(models.Model):
    """One vendor key's budget at one base URL for one model, learnt from the vendor's rate-limit headers.

    Workers change it under its row lock before and after every call (evaluation/providers/ratelimit.py);
    with REDIS_URL set the budgets live in Redis instead and this table stays empty.
    """

    key = models.CharField(max_length=64, unique=True, help_text="A hash of the key's fingerprint, URL and model.")
    label = models.CharField(
        max_length=300, help_text="Vendor, model, URL and the key's fingerprint (never the key itself)."
    )
    state = models.JSONField(
        default=dict, blank=True, help_text="Limits, what remains, reset times, calls in flight, a pause."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["label"]
        verbose_name = "rate-limit budget"

    def __str__(self) -> str:
        return self.label
