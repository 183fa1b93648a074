"""Admin for the per-role LLM configuration."""

from django import forms
from django.contrib import admin

from evaluation.models import EndpointCredential, LLMConfig
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
