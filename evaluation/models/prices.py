"""What each vendor charges for a model, from a date on: the price table every cost is computed from."""

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

__all__ = ["ModelPrice"]


def _per_million(name: str, help_text: str) -> models.DecimalField:
    return models.DecimalField(
        name, help_text=help_text, max_digits=12, decimal_places=6, validators=[MinValueValidator(Decimal(0))]
    )


class ModelPrice(models.Model):
    """One vendor's price for one model in force from effective_from (USD per million tokens).

    The shipped file (prices/vendors.yaml) seeds and updates these rows; a row changed in the admin is
    marked edited_in_admin and the loader leaves it alone from then on.
    """

    vendor = models.CharField(max_length=50, help_text="e.g. openai, anthropic")
    model = models.CharField(
        max_length=200, help_text='The base name: dated names ("gpt-5.2-2026-01-15") price as their base name.'
    )
    effective_from = models.DateField(help_text="The price is in force for calls on this date and after.")
    input_per_mtok = _per_million("input", "USD per million uncached input tokens")
    output_per_mtok = _per_million("output", "USD per million output tokens (thinking included)")
    cached_input_per_mtok = _per_million("cached input", "USD per million input tokens read from the prompt cache")
    cache_write_per_mtok = _per_million("cache write", "USD per million input tokens written to the prompt cache")
    cache_write_long_per_mtok = models.DecimalField(
        "long cache write",
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text="USD per million input tokens written to the 1-hour cache (Anthropic); empty: the cache write price",
    )
    batch_discount = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.5"),
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(1))],
        help_text="Fraction taken off every price for work sent through the vendor's batch API (0.5: half price).",
    )
    source = models.CharField(max_length=300, blank=True, help_text="Where the figures come from (a price page).")
    edited_in_admin = models.BooleanField(
        default=False, help_text="Changed by staff: load_prices no longer overwrites this row."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["vendor", "model", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["vendor", "model", "effective_from"], name="model_price_once_a_date")
        ]
        verbose_name = "model price"

    def __str__(self) -> str:
        return f"{self.vendor}/{self.model} from {self.effective_from}"
