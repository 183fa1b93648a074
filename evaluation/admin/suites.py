"""Admin for EVAL.md suites, their cases, results and the pass cache."""

from django.contrib import admin

from evaluation.models import CacheEntry, Case, CaseResult, Suite


class CaseInline(admin.TabularInline):
    model = Case
    extra = 0
    fields = ("line", "name", "prompt", "expect")


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "path", "discovered_at")
    search_fields = ("name", "path")
    inlines = [CaseInline]


@admin.register(Case)
class CaseAdmin(admin.ModelAdmin):
    list_display = ("name", "suite", "line")
    search_fields = ("name", "prompt", "expect")
    list_select_related = ("suite",)


@admin.register(CaseResult)
class CaseResultAdmin(admin.ModelAdmin):
    list_display = ("case", "run", "passed", "cached", "duration_ms", "created_at")
    list_filter = ("passed", "cached")
    readonly_fields = (
        "run",
        "case",
        "passed",
        "cached",
        "checks",
        "warnings",
        "transcript",
        "usage",
        "duration_ms",
        "fingerprint",
        "created_at",
    )


@admin.register(CacheEntry)
class CacheEntryAdmin(admin.ModelAdmin):
    list_display = ("case_name", "suite_path", "fingerprint", "created_at")
    search_fields = ("case_name", "suite_path", "fingerprint")
    readonly_fields = ("fingerprint", "case_name", "suite_path", "created_at")
