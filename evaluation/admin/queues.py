"""Admin for labelling queues: made through the same service as the judge card, the command and the API; each
queue's items and turns read-only; adjudications listed apart from the raw labels."""

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from evaluation.errors import InvalidInput
from evaluation.judging import services
from evaluation.models import (
    Adjudication,
    JudgeConfiguration,
    LabelQueue,
    QueueItem,
    QueueLabel,
    QueueOrigin,
    Rubric,
)


class MakeQueueForm(forms.Form):
    name = forms.CharField(max_length=200)
    rubric = forms.ModelChoiceField(Rubric.objects.all(), to_field_name="slug")
    origin = forms.ChoiceField(choices=QueueOrigin.choices, initial=QueueOrigin.LABEL_NEXT)
    count = forms.IntegerField(required=False, min_value=1, max_value=services.QUEUE_MAX_ITEMS, initial=20)
    configuration = forms.ModelChoiceField(
        JudgeConfiguration.objects.all(), required=False, help_text="Default: the rubric's newest."
    )
    source = forms.CharField(required=False, max_length=100, help_text="Filter: a transcript source.")
    candidate = forms.CharField(required=False, max_length=100, help_text="Filter: a candidate's name.")
    group = forms.CharField(required=False, max_length=120, help_text="Filter: a run group.")
    items = forms.CharField(required=False, help_text="Ids: item ids separated by commas or spaces.")
    seed = forms.IntegerField(required=False, min_value=0, initial=0)
    annotators = forms.ModelMultipleChoiceField(get_user_model().objects.filter(is_staff=True), required=False)
    adjudicators = forms.ModelMultipleChoiceField(get_user_model().objects.filter(is_staff=True), required=False)
    labels_per_item = forms.IntegerField(min_value=1, max_value=10, initial=2)
    blind = forms.BooleanField(required=False, initial=True)
    claim_seconds = forms.IntegerField(min_value=30, max_value=86_400, initial=600)

    def clean_items(self):
        text = self.cleaned_data.get("items", "").replace(",", " ").split()
        bad = [t for t in text if not t.isdigit()]
        if bad:
            raise forms.ValidationError(f"not an item id: {', '.join(bad[:5])}")
        return [int(t) for t in text]


class QueueItemInline(admin.TabularInline):
    model = QueueItem
    fields = ("item", "position", "done", "claimed_by", "claim_expires")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(LabelQueue)
class LabelQueueAdmin(admin.ModelAdmin):
    list_display = ("name", "rubric", "origin", "labels_per_item", "blind", "owner", "created_at", "page")
    list_filter = ("rubric", "blind", "origin")
    search_fields = ("name",)
    fields = (
        "name",
        "rubric",
        "rubric_version",
        "configuration",
        "owner",
        "annotators",
        "adjudicators",
        "labels_per_item",
        "blind",
        "claim_seconds",
        "origin",
        "origin_detail",
        "start_widths",
        "created_at",
    )
    readonly_fields = (
        "rubric",
        "rubric_version",
        "configuration",
        "origin",
        "origin_detail",
        "start_widths",
        "created_at",
    )
    filter_horizontal = ("annotators", "adjudicators")
    inlines = [QueueItemInline]

    @admin.display(description="Queue page")
    def page(self, obj):
        return format_html('<a href="{}">open</a>', reverse("evaluation-queue", args=[obj.pk]))

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = MakeQueueForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                queue = services.queue_create(
                    name=data["name"],
                    rubric=data["rubric"].slug,
                    owner=request.user,
                    origin=data["origin"],
                    items=data["items"],
                    count=data["count"],
                    seed=data["seed"] or 0,
                    configuration=data["configuration"].pk if data["configuration"] else None,
                    source=data["source"] or None,
                    candidate=data["candidate"] or None,
                    group=data["group"] or None,
                    annotators=[u.get_username() for u in data["annotators"]],
                    adjudicators=[u.get_username() for u in data["adjudicators"]],
                    labels_per_item=data["labels_per_item"],
                    blind=data["blind"],
                    claim_seconds=data["claim_seconds"],
                )
            except InvalidInput as exc:
                for problem in exc.problems:
                    form.add_error(None, str(problem))
            else:
                self.message_user(request, f"Queue {queue.name!r} made with {queue.entries.count()} items.")
                return redirect("evaluation-queue", queue.pk)
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Make a labelling queue",
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/evaluation/labelqueue/make.html", context)


@admin.register(Adjudication)
class AdjudicationAdmin(admin.ModelAdmin):
    list_display = ("item", "dimension", "value", "adjudicator", "rubric_version", "queue", "updated_at")
    list_filter = ("dimension__rubric", "queue")
    readonly_fields = ("item", "dimension", "rubric_version", "value", "score", "adjudicator", "user", "queue")

    def has_add_permission(self, request):
        return False


@admin.register(QueueItem)
class QueueItemAdmin(admin.ModelAdmin):
    """Who holds which item now: read-only (claims are taken on the labelling page and through the API)."""

    list_display = ("queue", "item", "position", "done", "claimed_by", "claim_expires")
    list_filter = ("queue",)
    readonly_fields = ("queue", "item", "position", "done", "claimed_by", "claim_expires")

    def has_add_permission(self, request):
        return False


@admin.register(QueueLabel)
class QueueLabelAdmin(admin.ModelAdmin):
    """Each person's turn at a queue item: shown, submitted or skipped, the seconds it took, the comment."""

    list_display = ("entry", "user", "submitted_at", "seconds", "skipped")
    list_filter = ("entry__queue", "skipped")
    readonly_fields = ("entry", "user", "shown_at", "submitted_at", "seconds", "skipped", "comment")

    def has_add_permission(self, request):
        return False
