"""Admin for persona-drift data: propositions, their scores, corrections, and accepting baselines."""

from django import forms
from django.contrib import admin, messages

from evaluation.admin.runs import (
    ReadOnlyResultAdmin,
    dimensions_summary,
    judged_by_summary,
    run_column,
    usage_summary,
)
from evaluation.drift import services
from evaluation.errors import Conflict, NotFound
from evaluation.models import (
    AgentMessage,
    CorrectionLog,
    DriftRun,
    Proposition,
    PropositionScore,
    PropositionSet,
)


class PropositionForm(forms.ModelForm):
    """A proposition's row in boxes that fit the page: the default text areas (40 columns by 10 rows for the
    claim and for the JSON) made the proposition set's page 2,000 px wide."""

    class Meta:
        model = Proposition
        fields = ("position", "proposition_id", "claim", "weight", "inverted", "extra")
        widgets = {
            "position": forms.NumberInput(attrs={"style": "width: 4em"}),
            "proposition_id": forms.TextInput(attrs={"size": 20}),
            "claim": forms.Textarea(attrs={"rows": 3, "cols": 40}),
            "weight": forms.NumberInput(attrs={"style": "width: 5em", "step": "any"}),
            "extra": forms.Textarea(attrs={"rows": 2, "cols": 16}),
        }


class PropositionInline(admin.TabularInline):
    model = Proposition
    form = PropositionForm
    extra = 0
    fields = ("position", "proposition_id", "claim", "weight", "inverted", "extra")


@admin.register(PropositionSet)
class PropositionSetAdmin(admin.ModelAdmin):
    list_display = ("dimension", "agent_key", "source_file", "updated_at")
    list_filter = ("dimension",)
    search_fields = ("agent_key",)
    inlines = [PropositionInline]


@admin.register(Proposition)
class PropositionAdmin(admin.ModelAdmin):
    list_display = ("proposition_id", "proposition_set", "weight", "inverted")
    list_filter = ("proposition_set__dimension", "inverted")
    search_fields = ("proposition_id", "claim")


@admin.register(PropositionScore)
class PropositionScoreAdmin(admin.ModelAdmin):
    list_display = ("proposition_id", "dimension", "score", "evaluation_run", "created_at")
    list_filter = ("dimension",)
    search_fields = ("proposition_id", "reasoning")
    readonly_fields = (
        "evaluation_run",
        "dimension",
        "proposition_id",
        "score",
        "reasoning",
        "context_snippet",
        "created_at",
    )


@admin.register(CorrectionLog)
class CorrectionLogAdmin(admin.ModelAdmin):
    list_display = ("agent", "outcome", "score", "threshold", "attempt_number", "created_at")
    list_filter = ("outcome", "agent")
    search_fields = ("original_text", "corrected_text", "reasoning")
    readonly_fields = (
        "agent",
        "run",
        "original_text",
        "corrected_text",
        "score",
        "threshold",
        "reasoning",
        "attempt_number",
        "outcome",
        "usage",
        "created_at",
    )
    exclude = ("token_usage",)

    @admin.display(description="token usage")
    def usage(self, obj):
        return usage_summary(obj.token_usage)


@admin.register(AgentMessage)
class AgentMessageAdmin(admin.ModelAdmin):
    list_display = ("agent", "channel", "recipient", "created_at", "source")
    list_filter = ("channel", "source", "agent")
    search_fields = ("text",)
    date_hierarchy = "created_at"


@admin.register(DriftRun)
class DriftRunAdmin(ReadOnlyResultAdmin):
    """Golden baselines are accepted here: a completed run becomes its agent's baselines/<agent>.json."""

    list_display = ("run_name", "dimension_names", "messages", "source", "is_baseline", "judges", "window_end")
    list_filter = ("is_baseline", "source")
    list_select_related = ["run", "run__agent"]
    run_name = run_column("agent")
    search_fields = ("run__run_id",)
    actions = ["accept_as_baseline"]
    readonly_fields = ("dimension_names", "judges")
    exclude = ("dimensions", "judged_by")

    @admin.display(description="agent")
    def agent(self, obj):
        agent = obj.run.agent
        return agent.display_name or agent.pk if agent else "-"

    @admin.display(description="messages", ordering="messages_judged")
    def messages(self, obj):
        return obj.messages_judged

    @admin.display(description="dimensions")
    def dimension_names(self, obj):
        return dimensions_summary(obj.dimensions)

    @admin.display(description="judged by")
    def judges(self, obj):
        return judged_by_summary(obj.judged_by)

    @admin.action(description="Accept the selected runs as their agents' golden baselines")
    def accept_as_baseline(self, request, queryset):
        for detail in queryset.select_related("run"):
            try:
                path = services.baseline_accept(run_id=detail.run.run_id)
            except (Conflict, NotFound) as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            self.message_user(request, f"{detail.run.run_id}: baseline written to {path.name}", messages.SUCCESS)
