"""Admin for the shared rate-limit budgets: read-only, a budget is the vendors' word, not staff's."""

from django.contrib import admin

from evaluation.models import RateLimitBudget


@admin.register(RateLimitBudget)
class RateLimitBudgetAdmin(admin.ModelAdmin):
    list_display = ("label", "updated_at")
    search_fields = ("label",)
    readonly_fields = ("key", "label", "state", "updated_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
