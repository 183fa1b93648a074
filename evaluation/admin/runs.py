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
from evaluation.templatetags.evaluation_extras import label

SUMMARY_ITEMS = 12
"""How many keys a readable summary of a JSON value lists before "and N more"."""


def _short(value, width: int = 80) -> str:
    """One JSON value on one line, cut at `width` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


WORDED_VALUES = {"ended_by", "target", "started_by", "source"}
"""Config keys whose values are terms of the app's ("max_turns", "is_complete"): shown in words."""


def _readable(key, value) -> str:
    """One config value in words: a term as words, a record of LLMs as role provider/model, a nested record
    as its plain fields, a list by its length; never a fragment of JSON."""
    if isinstance(value, str) and key in WORDED_VALUES and value:
        return label(value)
    if isinstance(value, dict):
        if value and all(isinstance(v, dict) and "provider" in v for v in value.values()):
            # by role name: PostgreSQL's jsonb keeps keys in its own order, SQLite in the order written
            return "; ".join(f"{label(role)} {v.get('provider')}/{v.get('model')}" for role, v in sorted(value.items()))
        plain = [(k, v) for k, v in value.items() if not isinstance(v, dict | list)]
        text = "; ".join(f"{label(k)} {_short(v, 40)}" for k, v in plain)
        more = len(value) - len(plain)
        return _short(text + (f" (and {more} more fields)" if more else ""), 160) if text else f"{len(value)} fields"
    if isinstance(value, list):
        return f"{len(value)} item{'s' if len(value) != 1 else ''}" if value else "none"
    return _short(value)


def summary_list(mapping, *, keys_as_labels: bool = True):
    """A dict as a short definition list (labelled keys, values in words on one line), in place of a JSON blob."""
    if not mapping:
        return "-"
    if not isinstance(mapping, dict):
        return _short(mapping, 200)
    items = list(mapping.items())
    rows = format_html_join(
        "",
        "<dt>{}</dt><dd>{}</dd>",
        ((label(k) if keys_as_labels else k, _readable(k, v)) for k, v in items[:SUMMARY_ITEMS]),
    )
    more = f"and {len(items) - SUMMARY_ITEMS} more" if len(items) > SUMMARY_ITEMS else ""
    return format_html('<dl class="summary">{}</dl>{}', rows, more)


def run_name(run) -> str:
    """What people call a run: the persona (or the stored session it evaluated) and the topic of a tutor run,
    the suite of a suite run, the agent of a drift run; its id is on its page, not in lists."""
    if run.persona_id or run.topic_id:
        who = label(run.persona) if run.persona_id else "Stored session"
        return f"{who} · {label(run.topic)}" if run.topic_id else who
    suite_run = getattr(run, "suite_run", None) if run.kind == "suite" else None
    if suite_run is not None:
        return suite_run.name
    if run.agent_id:
        return str(getattr(run.agent, "display_name", "") or run.agent_id)
    return label(run.kind)


def run_column(description: str = "run"):
    """A list column naming a row's run as people do (run_name), its id on hover: ids of 30 characters
    without a space widened every list of a run's details past its box."""

    @admin.display(description=description, ordering="run__created_at")
    def column(self, obj):
        return format_html('<span title="{}">{}</span>', obj.run.run_id, run_name(obj.run))

    return column


def usage_summary(usage) -> str:
    """Token usage as a sentence: calls, input and output tokens, and the calls per provider."""
    if not isinstance(usage, dict) or not usage:
        return "no model calls recorded"
    parts = []
    if usage.get("calls") is not None:
        parts.append(f"{usage['calls']} call{'s' if usage['calls'] != 1 else ''}")
    for key, word in (("input_tokens", "input"), ("output_tokens", "output")):
        if isinstance(usage.get(key), int):
            parts.append(f"{usage[key]:,} {word} tokens")
    by_provider = usage.get("by_provider")
    if isinstance(by_provider, dict) and by_provider:
        parts.append("by provider: " + ", ".join(f"{k} {_short(v, 30)}" for k, v in by_provider.items()))
    return " · ".join(parts) or _short(usage, 200)


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
    fields = ("attempt", "turn", "role", "content", "timestamp")
    classes = ["collapse"]
    verbose_name_plural = "messages (the transcript; the report shows it in full)"


class RunEventInline(ReadOnlyInline):
    model = RunEvent
    fields = ("at", "attempt", "status", "actor", "note")
    readonly_fields = fields
    verbose_name_plural = "history (who changed the run's state)"


class DimensionScoreInline(ReadOnlyInline):
    model = DimensionScore
    fields = ("dimension_label", "score", "analysis")
    readonly_fields = ("dimension_label",)

    @admin.display(description="dimension")
    def dimension_label(self, obj):
        return label(obj.dimension)


class ProblemInline(ReadOnlyInline):
    model = Problem
    fields = ("rank", "severity", "cause", "title", "turns", "quote", "quote_found")
    readonly_fields = ("cause",)

    @admin.display(description="root cause")
    def cause(self, obj):
        return label(obj.root_cause)


class DriftRunInline(admin.StackedInline):
    model = DriftRun
    can_delete = False
    readonly_fields = (
        "dimensions_summary",
        "judged_by_summary",
        "sample_size",
        "source",
        "batch_size",
        "is_baseline",
        "messages_judged",
        "window_start",
        "window_end",
    )

    exclude = ("dimensions", "judged_by")

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="dimensions")
    def dimensions_summary(self, obj):
        return dimensions_summary(obj.dimensions)

    @admin.display(description="judged by")
    def judged_by_summary(self, obj):
        return judged_by_summary(obj.judged_by)


def dimensions_summary(dimensions) -> str:
    """A drift run's dimensions as words, comma separated."""
    if not dimensions:
        return "-"
    if isinstance(dimensions, list | tuple):
        return ", ".join(label(d) for d in dimensions)
    return _short(dimensions, 120)


def judged_by_summary(judged_by) -> str:
    """Who judged a drift run: one judge for every dimension in one word, else per dimension."""
    if not judged_by:
        return "-"
    if not isinstance(judged_by, dict):
        return _short(judged_by, 120)
    judges = {_short(v, 60) for v in judged_by.values()}
    if len(judges) == 1:
        return judges.pop()
    return "; ".join(f"{label(d)}: {_short(v, 60)}" for d, v in judged_by.items())


class SuiteRunInline(admin.StackedInline):
    model = SuiteRun
    can_delete = False
    readonly_fields = ("suite", "suite_path", "model", "judge_model", "judge")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    list_display: tuple[str, ...] = ("title", "status", "score", "created_at")
    list_display_links = ("title",)
    list_filter = ("kind", "status", "stage", "source", "persona", "topic", "created_at")
    search_fields = ("run_id", "group", "error", "summary")
    list_select_related = ("persona", "topic", "agent", "suite_run")
    date_hierarchy = "created_at"
    readonly_fields = ("report_link", "what", "config_summary", "usage", *RESULT_FIELDS)
    exclude = ("config",)  # shown as config_masked: URL credentials never reach the page
    fieldsets = (
        (None, {"fields": ("report_link", "run_id", "what", "kind", "status", "stage", "detail", "overall_score")}),
        ("Result", {"fields": ("summary", "judge_label", "usage", "cost_usd", "cost_limit_usd", "error")}),
        ("Subject", {"fields": ("source", "source_session_id", "persona", "topic", "agent", "group", "repeat_index")}),
        ("Started with", {"fields": ("config_summary", "seed", "max_turns", "turn", "started_by")}),
        ("When", {"fields": ("created_at", "started_at", "completed_at")}),
        ("Worker", {"classes": ["collapse"], "fields": ("attempt", "worker", "heartbeat_at")}),
        (
            "Raw values",
            {
                "classes": ["collapse"],
                "fields": ("id", "config_masked", "token_usage", "error_traceback", "artifacts_dir"),
                "description": "As stored, with credentials in URLs masked.",
            },
        ),
    )
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

    @admin.display(description="run")
    def what(self, obj):
        """Persona and topic of a tutor run, the agent of a drift run: what people call the run."""
        return run_name(obj)

    def get_inlines(self, request, obj):
        """The inlines of the run's kind: a tutor run has no drift or suite details, and the reverse."""
        by_kind = {
            "tutor": [DimensionScoreInline, ProblemInline, RunMessageInline],
            "drift": [DriftRunInline],
            "suite": [SuiteRunInline],
        }
        if obj is None:
            return self.inlines
        return [RunEventInline, *by_kind.get(obj.kind, [])]

    @admin.display(description="run", ordering="run_id")
    def title(self, obj):
        """The run as people name it, and under it its kind; its id on hover and on its page (an id of 30
        characters in a narrow column was broken mid-word)."""
        return format_html(
            '<span title="{}">{}</span><br><small class="run-kind">{}</small>',
            obj.run_id,
            self.what(obj),
            obj.get_kind_display(),
        )

    @admin.display(description="score", ordering="overall_score")
    def score(self, obj):
        return "-" if obj.overall_score is None else f"{obj.overall_score:.1f}"

    @admin.display(description="config")
    def config_summary(self, obj):
        """The run's config as labelled lines, masked as config_masked is; the full JSON is under Raw values."""
        return summary_list(redact(obj.config or {}))

    @admin.display(description="token usage")
    def usage(self, obj):
        return usage_summary(obj.token_usage)

    @admin.display(description="config")
    def config_masked(self, obj):
        """What the run was started with, credentials in URLs masked as the API and the run page show it."""
        return format_html("<pre>{}</pre>", json.dumps(redact(obj.config or {}), indent=2, ensure_ascii=False))

    @admin.display(description="Report")
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
    list_display = ("title", "stage", "error_short", "created_at")

    @admin.display(description="error")
    def error_short(self, obj):
        return _short(obj.error or "", 90)

    def get_queryset(self, request):
        return super().get_queryset(request).filter(status="failed")


class ReadOnlyResultAdmin(admin.ModelAdmin):
    """Results are written by runs, never by hand."""

    list_select_related = ["run__persona", "run__topic", "run__agent", "run__suite_run"]  # the run's name

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RunMessage)
class RunMessageAdmin(ReadOnlyResultAdmin):
    list_display = ("run_name", "turn", "role", "timestamp")
    run_name = run_column()
    list_filter = ("role",)
    search_fields = ("content", "run__run_id")


@admin.register(DimensionScore)
class DimensionScoreAdmin(ReadOnlyResultAdmin):
    list_display = ("run_name", "dimension_label", "score")
    run_name = run_column()

    @admin.display(description="dimension", ordering="dimension")
    def dimension_label(self, obj):
        return label(obj.dimension)

    list_filter = ("dimension",)
    search_fields = ("run__run_id", "analysis")


@admin.register(Problem)
class ProblemAdmin(ReadOnlyResultAdmin):
    list_display = ("run_name", "rank", "severity", "cause", "title", "quote_found")
    run_name = run_column()

    @admin.display(description="root cause", ordering="root_cause")
    def cause(self, obj):
        return label(obj.root_cause)

    list_filter = ("severity", "root_cause", "quote_found")
    search_fields = ("title", "description", "quote", "run__run_id")


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyResultAdmin):
    list_display = ("run_name", "at", "attempt", "status", "actor")
    run_name = run_column()
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
