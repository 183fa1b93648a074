"""Admin for EVAL.md suites, their cases, results and the pass cache."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.urls import reverse
from django.utils.html import format_html

from evaluation.admin.runs import ReadOnlyResultAdmin, run_column, usage_summary
from evaluation.errors import Conflict, InvalidInput, NotFound
from evaluation.models import CacheEntry, Case, CaseResult, Suite, SuiteRun
from evaluation.runs import selectors as run_selectors
from evaluation.suites import selectors, services


class CaseForm(forms.ModelForm):
    """A case's prompt and rubric in boxes that fit the page (the default text areas are 40 columns each
    and a long name's input widened the table past the window)."""

    class Meta:
        model = Case
        fields = ("line", "name", "prompt", "expect")
        widgets = {
            "line": forms.NumberInput(attrs={"style": "width: 5em"}),
            "name": forms.TextInput(attrs={"style": "width: 100%; box-sizing: border-box"}),
            "prompt": forms.Textarea(attrs={"rows": 3, "style": "width: 100%; box-sizing: border-box"}),
            "expect": forms.Textarea(attrs={"rows": 3, "style": "width: 100%; box-sizing: border-box"}),
        }


class CaseInline(admin.StackedInline):
    model = Case
    form = CaseForm
    extra = 0
    fields = (("line", "name"), "prompt", "expect")


class SuiteForm(forms.ModelForm):
    class Meta:
        model = Suite
        fields = "__all__"

    def clean_path(self):
        path = self.cleaned_data["path"]
        try:
            services.suite_path_check(path)
        except services.SuiteError as exc:
            raise forms.ValidationError(exc.reason) from None
        return path


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    form = SuiteForm
    list_display = ("name", "path", "case_count", "last_run", "discovered_at")
    search_fields = ("name", "path")
    inlines = [CaseInline]
    actions = ["run_suites"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_cases=Count("cases"))

    @admin.display(description="Cases", ordering="n_cases")
    def case_count(self, obj):
        return obj.n_cases

    @admin.display(description="Last run")
    def last_run(self, obj):
        run = selectors.suite_last_run(obj)
        if run is None:
            return "-"
        return format_html(
            '<a href="{}">{} ({})</a>',
            reverse("evaluation-suite-run", args=[run_selectors.run_url_id(run)]),
            run.detail or run.status,
            run.created_at.strftime("%Y-%m-%d %H:%M"),
        )

    @admin.action(description="Run the selected suites in the background")
    def run_suites(self, request, queryset):
        started = []
        for suite in queryset:
            try:
                started.append(services.suite_run_start(suite_id=suite.pk, user=request.user).run_id)
            except (Conflict, NotFound, InvalidInput) as exc:
                self.message_user(request, f"{suite.name}: not started: {exc}", messages.ERROR)
        if started:
            self.message_user(request, f"Started {len(started)} suite run(s): {', '.join(started)}", messages.SUCCESS)


@admin.register(Case)
class CaseAdmin(admin.ModelAdmin):
    list_display = ("name", "suite", "line")
    search_fields = ("name", "prompt", "expect")
    list_select_related = ("suite",)


@admin.register(CaseResult)
class CaseResultAdmin(admin.ModelAdmin):
    list_display = ("case", "run_name", "repeat", "passed", "cached", "judge_model", "duration", "created_at")
    list_select_related = ("case", "run__suite_run")
    run_name = run_column("suite run")

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj):
        """Milliseconds to two significant figures: the float as stored was 17 digits wide."""
        if obj.duration_ms is None:
            return "-"
        return f"{obj.duration_ms:.2g} ms" if obj.duration_ms < 100 else f"{obj.duration_ms:,.0f} ms"

    list_filter = ("passed", "cached")
    exclude = ("usage",)
    readonly_fields = (
        "run",
        "case",
        "repeat",
        "agent_model",
        "judge_model",
        "passed",
        "cached",
        "checks",
        "warnings",
        "transcript",
        "usage_line",
        "duration_ms",
        "fingerprint",
        "created_at",
    )

    @admin.display(description="usage")
    def usage_line(self, obj):
        return usage_summary(obj.usage)


@admin.register(CacheEntry)
class CacheEntryAdmin(admin.ModelAdmin):
    list_display = ("case_name", "suite", "fingerprint_start", "created_at")
    search_fields = ("case_name", "suite_path", "fingerprint")
    readonly_fields = ("fingerprint", "case_name", "suite_path", "created_at")

    @admin.display(description="suite", ordering="suite_path")
    def suite(self, obj):
        """The suite file's folder and name (skills/greeter/EVAL.md -> greeter/EVAL.md), the whole path on hover."""
        return format_html('<span title="{}">{}</span>', obj.suite_path, "/".join(obj.suite_path.split("/")[-2:]))

    @admin.display(description="fingerprint", ordering="fingerprint")
    def fingerprint_start(self, obj):
        """A hash's first 12 characters tell entries apart; the whole hash is on the entry's page."""
        return format_html('<span title="{}">{}…</span>', obj.fingerprint, obj.fingerprint[:12])


@admin.register(SuiteRun)
class SuiteRunAdmin(ReadOnlyResultAdmin):
    list_display = ("run_name", "status", "result", "model", "judge_model", "repeats", "started")
    list_select_related = ["run", "suite"]
    run_name = run_column("suite")  # the run is called by its suite, as the suite run page is
    list_filter = ("run__status",)
    search_fields = ("run__run_id", "suite_path")

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_results=Count("run__case_results"),
                n_passed=Count("run__case_results", filter=Q(run__case_results__passed=True)),
            )
        )

    @admin.display(description="status", ordering="run__status")
    def status(self, obj):
        return obj.run.get_status_display()

    @admin.display(description="started", ordering="run__created_at")
    def started(self, obj):
        return obj.run.created_at

    @admin.display(description="result")
    def result(self, obj):
        """Passed and failed cases of the run (each repeat counted), as the suite run page tells them."""
        total, passed = getattr(obj, "n_results", 0), getattr(obj, "n_passed", 0)
        if not total:
            return "-"
        failed = total - passed
        outcome = "pass" if failed == 0 else "FAIL"
        return format_html(
            '<span class="result-{}">{}</span>: {} passed, {} failed', outcome.lower(), outcome, passed, failed
        )
