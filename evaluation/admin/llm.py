"""Admin for the per-role LLM configuration."""

from django import forms
from django.contrib import admin

from evaluation.models import LLMConfig
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
