"""Admin for the per-role LLM configuration."""

from django.contrib import admin

from evaluation.models import LLMConfig


@admin.register(LLMConfig)
class LLMConfigAdmin(admin.ModelAdmin):
    list_display = ("role", "provider", "model", "base_url", "updated_at")
    list_filter = ("provider",)
    search_fields = ("role", "model")
