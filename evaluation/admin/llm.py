"""Admin for the per-role LLM configuration and the price table."""

from django import forms
from django.contrib import admin

from evaluation.models import EndpointCredential, LLMConfig, ModelPrice
from evaluation.providers import vendor_choices


class LLMConfigForm(forms.ModelForm):
    # The vendors come from the providers' registry, the one list of them.
    provider = forms.ChoiceField(choices=vendor_choices)

    class Meta:
        model = LLMConfig
        fields = "__all__"


@admin.register(LLMConfig)
class LLMConfigAdmin(admin.ModelAdmin):
    form = LLMConfigForm
    list_display = ("role", "provider", "model", "base_url", "updated_at")
    list_filter = ("provider",)
    search_fields = ("role", "model")


class EndpointCredentialForm(forms.ModelForm):
    # Write-only: the stored key is never rendered back into the page; leave it empty to keep it.
    api_key = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        help_text="Write-only. Leave empty to keep the stored key.",
    )

    class Meta:
        model = EndpointCredential
        fields = ("base_url", "api_key")

    def clean_api_key(self):
        value = self.cleaned_data.get("api_key", "")
        if not value:
            if self.instance.pk:
                return self.instance.api_key
            raise forms.ValidationError("api_key: is required for a new credential")
        return value


@admin.register(EndpointCredential)
class EndpointCredentialAdmin(admin.ModelAdmin):
    form = EndpointCredentialForm
    list_display = ("base_url", "updated_at")
    search_fields = ("base_url",)


def price_column(field: str, description: str):
    """A list column of a decimal without its trailing zeros."""

    @admin.display(description=description, ordering=field)
    def column(self, obj):
        value = getattr(obj, field)
        return "-" if value is None else f"{value.normalize():f}"

    return column


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Prices per million tokens from a date on. A row saved here is marked edited_in_admin, and
    load_prices leaves it as staff set it; a new price is a new row with a later date."""

    list_display = (
        "vendor",
        "model",
        "effective_from",
        "input_price",
        "cached_input_price",
        "cache_write_price",
        "cache_write_long_price",
        "output_price",
        "batch",
    )  # whether staff edited a price is the list's filter (edited in admin), not an eleventh column
    list_filter = ("vendor", "edited_in_admin")
    search_fields = ("model",)
    readonly_fields = ("edited_in_admin", "updated_at")

    # The list's prices without the six decimals the table stores ("1" for 1.000000, "0.075"): ten columns of
    # padded figures did not fit beside the filters.
    input_price = price_column("input_per_mtok", "input")
    cached_input_price = price_column("cached_input_per_mtok", "cached input")
    cache_write_price = price_column("cache_write_per_mtok", "cache write")
    cache_write_long_price = price_column("cache_write_long_per_mtok", "long cache write")
    output_price = price_column("output_per_mtok", "output")
    batch = price_column("batch_discount", "batch discount")

    def save_model(self, request, obj, form, change):
        obj.edited_in_admin = True
        super().save_model(request, obj, form, change)
