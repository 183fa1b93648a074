"""Admin for evaluation runs: results are read-only; completed and failed runs have their own views."""

import json

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from evaluation.errors import Conflict, InvalidInput
from evaluation.models import (
    BaselineGate,
    CompletedRun,
    DimensionScore,
    DriftRun,
    EvaluationRun,
    FailedRun,
    Problem,
    RunEvent,
    RunMessage,
    SuiteRun,
)
from evaluation.redact import redact
from evaluation.runs import selectors as run_selectors
from evaluation.runs import services as runs

RESULT_FIELDS = (
    "id",
    "run_id",
    "kind",
    "status",
    "stage",
    "detail",
    "attempt",
    "heartbeat_at",
    "worker",
    "started_by",
    "turn",
    "max_turns",
    "source",
    "source_session_id",
    "persona",
    "topic",
    "agent",
    "group",
    "repeat_index",
    "seed",
    "config_masked",
    "token_usage",
    "cost_usd",
    "cost_limit_usd",
    "error",
    "error_traceback",
    "artifacts_dir",
    "overall_score",
    "summary",
    "judge_label",
    "created_at",
    "started_at",
    "completed_at",
)


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class RunMessageInline(ReadOnlyInline):
    model = RunMessage
    fields = ("attempt", "turn", "role", "content", "timestamp", "metadata")


class RunEventInline(ReadOnlyInline):
    model = RunEvent
    fields = ("at", "attempt", "status", "actor", "note")
    readonly_fields = fields
    verbose_name_plural = "history (who changed the run's state)"


class DimensionScoreInline(ReadOnlyInline):
    model = DimensionScore
    fields = ("dimension", "score", "analysis")


class ProblemInline(ReadOnlyInline):
    model = Problem
    fields = ("rank", "severity", "root_cause", "title", "turns", "quote", "quote_found")


class DriftRunInline(admin.StackedInline):
    model = DriftRun
    can_delete = False
    readonly_fields = (
        "dimensions",
        "sample_size",
        "source",
        "batch_size",
        "is_baseline",
        "messages_judged",
        "window_start",
        "window_end",
    )

    def has_add_permission(self, request, obj=None):
        return False


class SuiteRunInline(admin.StackedInline):
    model = SuiteRun
    can_delete = False
    readonly_fields = ("suite", "suite_path", "model", "judge_model", "judge")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    list_display: tuple[str, ...] = (
        "run_id",
        "kind",
        "status",
        "stage",
        "persona",
        "topic",
        "agent",
        "overall_score",
        "created_at",
    )
    list_filter = ("kind", "status", "stage", "source", "persona", "topic", "created_at")
    search_fields = ("run_id", "group", "error", "summary")
    list_select_related = ("persona", "topic", "agent")
    date_hierarchy = "created_at"
    readonly_fields = ("report_link", *RESULT_FIELDS)
    exclude = ("config",)  # shown as config_masked: URL credentials never reach the page
    inlines = [RunEventInline, DriftRunInline, SuiteRunInline, DimensionScoreInline, ProblemInline, RunMessageInline]
    actions = ["cancel_runs", "retry_runs"]

    # The actions need the same permissions as the API's and the dashboard's cancel and retry: a user
    # who may only view runs is not offered them, and a posted action they lack does nothing.
    @admin.action(description="Cancel the selected queued or running runs", permissions=["cancel"])
    def cancel_runs(self, request, queryset):
        self._each(request, queryset, runs.run_cancel, "Cancelled")

    @admin.action(description="Retry the selected failed or interrupted runs (a new attempt)", permissions=["retry"])
    def retry_runs(self, request, queryset):
        self._each(request, queryset, runs.run_requeue, "Queued again")

    def has_cancel_permission(self, request):
        return request.user.has_perm("evaluation.cancel_run")

    def has_retry_permission(self, request):
        return request.user.has_perm("evaluation.retry_run")

    def _each(self, request, queryset, service, done):
        ok = []
        for run in queryset:
            try:
                service(run, user=request.user)
                ok.append(run.run_id)
            except (Conflict, InvalidInput) as exc:
                self.message_user(request, f"{run.run_id}: {exc}", messages.ERROR)
        if ok:
            self.message_user(request, f"{done}: {', '.join(ok)}", messages.SUCCESS)

    @admin.display(description="Report")
    @admin.display(description="config")
    def config_masked(self, obj):
        """What the run was started with, credentials in URLs masked as the API and the run page show it."""
        return format_html("<pre>{}</pre>", json.dumps(redact(obj.config or {}), indent=2, ensure_ascii=False))

    def report_link(self, obj):
        if not obj.pk:
            return "-"
        links = [
            format_html(
                '<a href="{}">Open the report</a>',
                reverse("evaluation-run-report", args=[run_selectors.run_url_id(obj)]),
            )
        ]
        if obj.group:
            links.append(format_html('<a href="{}">comparison</a>', reverse("evaluation-comparison", args=[obj.group])))
        return format_html_join(" · ", "{}", ((link,) for link in links))

    def has_add_permission(self, request):
        # Runs are started from the dashboard, the API or the CLI, never typed in.
        return False


@admin.register(CompletedRun)
class CompletedRunAdmin(EvaluationRunAdmin):
    def get_queryset(self, request):
        return super().get_queryset(request).filter(status="completed")


@admin.register(FailedRun)
class FailedRunAdmin(EvaluationRunAdmin):
    list_display = ("run_id", "kind", "stage", "persona", "topic", "error", "created_at")

    def get_queryset(self, request):
        return super().get_queryset(request).filter(status="failed")


class ReadOnlyResultAdmin(admin.ModelAdmin):
    """Results are written by runs, never by hand."""

    list_select_related = ["run"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RunMessage)
class RunMessageAdmin(ReadOnlyResultAdmin):
    list_display = ("run", "turn", "role", "timestamp")
    list_filter = ("role",)
    search_fields = ("content", "run__run_id")


@admin.register(DimensionScore)
class DimensionScoreAdmin(ReadOnlyResultAdmin):
    list_display = ("run", "dimension", "score")
    list_filter = ("dimension",)
    search_fields = ("run__run_id", "analysis")


@admin.register(Problem)
class ProblemAdmin(ReadOnlyResultAdmin):
    list_display = ("run", "rank", "severity", "root_cause", "title", "quote_found")
    list_filter = ("severity", "root_cause", "quote_found")
    search_fields = ("title", "description", "quote", "run__run_id")


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyResultAdmin):
    list_display = ("run", "at", "attempt", "status", "actor")
    list_filter = ("status",)
    search_fields = ("run__run_id", "actor", "note")


@admin.register(BaselineGate)
class BaselineGateAdmin(admin.ModelAdmin):
    """A batch's check against its baseline, stored when its last run ends: read-only, linked to its page."""

    list_display = ("group", "baseline", "outcome", "forced", "reason", "checked_at")
    list_filter = ("outcome", "forced")
    search_fields = ("group", "baseline")
    readonly_fields = ("group", "baseline", "outcome", "forced", "reason", "comparison", "detail", "checked_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="why")
    def reason(self, obj: BaselineGate) -> str:
        return str((obj.detail or {}).get("reason", ""))

    @admin.display(description="comparison page")
    def comparison(self, obj: BaselineGate) -> str:
        url = reverse("evaluation-comparison", args=[obj.group])
        return format_html('<a href="{}">{}</a>', url, obj.group)
