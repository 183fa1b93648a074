"""Admin for provider batches: read-only, one row per batch sent to a vendor's batch API."""

from django.contrib import admin
from django.utils.html import format_html

from evaluation.models import ProviderBatch
from evaluation.templatetags.evaluation_extras import label


@admin.register(ProviderBatch)
class ProviderBatchAdmin(admin.ModelAdmin):
    """What each batch serves and how far it is; the rows are written by the batch runner only."""

    list_display = ("batch", "progress", "provider_state", "failed", "retried", "lost", "cost_usd", "updated_at")
    list_filter = ("state", "vendor", "kind")
    search_fields = ("provider_batch_id", "job_key", "run_id")
    readonly_fields = tuple(f.name for f in ProviderBatch._meta.fields)

    @admin.display(description="batch", ordering="created_at")
    def batch(self, obj: ProviderBatch):
        """Vendor, kind and items done, the vendor's id of 40 characters on hover and on the batch's page."""
        return format_html(
            '<span title="{}">{} · {}, {}/{}</span>',
            obj.provider_batch_id or "(submitting)",
            obj.vendor,
            label(obj.kind),
            obj.done,
            obj.total,
        )

    @admin.display(description="state", ordering="state")
    def progress(self, obj: ProviderBatch) -> str:
        """What a job waiting on it shows, while it is open; its state after."""
        return obj.stage_text if obj.state in ("submitting", "waiting") else obj.get_state_display()

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
