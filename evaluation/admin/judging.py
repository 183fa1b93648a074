"""Admin for judge validity: rubrics, imported transcripts (with an upload), items and their labels,
judge configurations and scores, canary sets."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors, services
from evaluation.models import (
    Annotation,
    CanarySet,
    Item,
    JudgeConfiguration,
    JudgeScore,
    Rubric,
    RubricDimension,
    RubricVersion,
    Transcript,
)
from evaluation.templatetags.evaluation_extras import label


class RubricDimensionForm(forms.ModelForm):
    class Meta:
        model = RubricDimension
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("scale_kind") == "categories":
            cats = cleaned.get("categories") or []
            if not isinstance(cats, list) or len(cats) < 2 or len(set(map(str, cats))) != len(cats):
                self.add_error("categories", "List two or more distinct categories, best first.")
        else:
            low, high = cleaned.get("scale_min"), cleaned.get("scale_max")
            if low is None or high is None or low >= high:
                self.add_error("scale_max", "An integer scale needs a minimum below its maximum.")
        return cleaned


class RubricForm(forms.ModelForm):
    class Meta:
        model = Rubric
        fields = "__all__"

    def clean_version(self):
        value = self.cleaned_data["version"]
        recorded = (
            self.instance.versions.order_by("-number").values_list("number", flat=True).first()
            if self.instance.pk
            else None
        )
        if recorded is not None and value < recorded:
            raise forms.ValidationError(f"Version {recorded} is on record; a version number can only go up.")
        return value


@admin.register(RubricVersion)
class RubricVersionAdmin(admin.ModelAdmin):
    """Every recorded version of every rubric, read-only (its rubric's page lists them too)."""

    list_display = ("rubric", "number", "unit", "created_at")
    list_filter = ("rubric",)
    list_select_related = ("rubric",)
    readonly_fields = ("rubric", "number", "unit", "dimensions", "content_hash", "created_at", "updated_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RubricVersionInline(admin.TabularInline):
    """The recorded versions, read-only: labels and judgements are read against the one they were made under."""

    model = RubricVersion
    extra = 0
    can_delete = False
    fields = ("number", "scales", "label_count", "created_at")
    readonly_fields = fields
    verbose_name_plural = "versions (recorded by themselves when a scale, question or anchor changes)"

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="Scales")
    def scales(self, obj):
        return "; ".join(f"{s['dimension']} {s['scale']}" for s in selectors.version_scales(obj))

    @admin.display(description="Labels")
    def label_count(self, obj):
        return obj.annotations.count()


class RubricDimensionInline(admin.StackedInline):
    model = RubricDimension
    form = RubricDimensionForm
    extra = 0
    fields = (
        ("name", "position"),
        "question",
        ("scale_kind", "scale_min", "scale_max"),
        "categories",
        "aliases",
        "anchors",
    )


@admin.register(Rubric)
class RubricAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "version", "unit", "dimension_count", "updated_at")
    list_filter = ("unit",)
    search_fields = ("slug", "name")
    form = RubricForm
    inlines = [RubricDimensionInline, RubricVersionInline]
    actions = ["rejudge_canary"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_dimensions=Count("dimensions"))

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        # Labels and judgements keep the version they were made under: a changed scale, question or anchor of
        # a version that has some is a new version; one that has none changes in place.
        version = services.rubric_version_record(rubric=form.instance)
        if version.changed:
            self.message_user(request, str(version), messages.WARNING if version.created else messages.INFO)
        # A changed prompt, scale or version is a new judge configuration: its canary is judged again.
        changed = form.has_changed() or any(f.has_changed() for f in formsets)
        if change and changed and services.canary_rejudge_later(rubric=form.instance.slug):
            self.message_user(
                request, f"{form.instance.slug}: the canary set is being judged under the changed rubric."
            )

    @admin.action(description="Judge the canary set under the current judge configuration")
    def rejudge_canary(self, request, queryset):
        for rubric in queryset:
            if services.canary_rejudge_later(rubric=rubric.slug):
                self.message_user(request, f"{rubric.slug}: canary queued.", messages.SUCCESS)
            else:
                self.message_user(request, f"{rubric.slug}: no canary set.", messages.WARNING)

    @admin.display(description="Dimensions", ordering="n_dimensions")
    def dimension_count(self, obj):
        return obj.n_dimensions


@admin.register(RubricDimension)
class RubricDimensionAdmin(admin.ModelAdmin):
    form = RubricDimensionForm
    list_display = ("name", "rubric", "position", "scale")
    list_filter = ("rubric", "scale_kind")
    search_fields = ("name",)

    @admin.display(description="scale", ordering="scale_kind")
    def scale(self, obj):
        """An integer range ("1-10") or the categories best first, in one column."""
        if obj.scale_kind == "categories":
            return " / ".join(str(c) for c in obj.categories or []) or "-"
        return f"{obj.scale_min}-{obj.scale_max}"

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        self._record(request, obj.rubric)

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        self._record(request, obj.rubric)

    def delete_queryset(self, request, queryset):
        rubrics = list(Rubric.objects.filter(dimensions__in=queryset).distinct())
        super().delete_queryset(request, queryset)
        for rubric in rubrics:
            self._record(request, rubric)

    def _record(self, request, rubric):
        version = services.rubric_version_record(rubric=rubric)
        if version.changed:
            self.message_user(request, str(version), messages.WARNING if version.created else messages.INFO)


class ImportForm(forms.Form):
    file = forms.FileField(help_text="JSON, JSONL, plain text with speaker prefixes, or a candidate-response set.")
    format = forms.ChoiceField(choices=[(f, f) for f in ("auto", "json", "jsonl", "text", "candidates", "bridge")])
    rubric = forms.ModelChoiceField(
        Rubric.objects.all(), required=False, to_field_name="slug", help_text="Default: by record kind."
    )
    source = forms.CharField(required=False, max_length=100, help_text="Default: the file's name.")
    annotator = forms.CharField(
        required=False, max_length=150, help_text="Who made the file's labels (default: the source)."
    )
    speaker_separator = forms.CharField(
        required=False,
        initial=":",
        max_length=10,
        strip=False,
        help_text="Plain text: between the speaker and the message (default ':').",
    )
    transcript_separator = forms.CharField(
        required=False,
        initial="---",
        max_length=20,
        help_text="Plain text: the line between transcripts (default ---).",
    )
    map_labels = forms.FileField(
        required=False,
        label="Label map",
        help_text='JSON or YAML {"<dimension>" or "*": {"<other wording>": "<label of the scale>"}}.',
    )
    skip_invalid = forms.BooleanField(
        required=False, help_text="Import the valid records and list the rejected ones (default: all or nothing)."
    )


class ItemInline(admin.TabularInline):
    model = Item
    extra = 0
    fields = ("key", "response", "label_count", "item_link")
    readonly_fields = ("key", "response", "label_count", "item_link")
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="Labels")
    def label_count(self, obj):
        return obj.annotations.count()

    @admin.display(description="")
    def item_link(self, obj):
        return format_html('<a href="{}">label</a>', reverse("admin:evaluation_item_change", args=[obj.pk]))


@admin.register(Transcript)
class TranscriptAdmin(admin.ModelAdmin):
    list_display = ("external_id", "source", "topic", "message_count", "item_count", "imported_at")
    list_filter = ("source", "topic")
    search_fields = ("external_id", "source")
    readonly_fields = ("conversation", "content_hash", "imported_at", "updated_at")
    fields = ("source", "external_id", "topic", "metadata", "conversation", "content_hash", "imported_at")
    inlines = [ItemInline]
    change_list_template = "admin/evaluation/transcript/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_items=Count("items"))

    @admin.display(description="Messages")
    def message_count(self, obj):
        return len(obj.messages or [])

    @admin.display(description="Items", ordering="n_items")
    def item_count(self, obj):
        return obj.n_items

    @admin.display(description="Conversation")
    def conversation(self, obj):
        return format_html_join(
            "", "<p><strong>{}</strong>: {}</p>", ((m.get("role", ""), m.get("content", "")) for m in obj.messages)
        )

    def get_urls(self):
        return [
            path("upload/", self.admin_site.admin_view(self.upload_view), name="evaluation_transcript_upload"),
            *super().get_urls(),
        ]

    def upload_view(self, request):
        if not request.user.has_perm("evaluation.add_transcript"):
            raise PermissionDenied
        form = ImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            label_map = form.cleaned_data["map_labels"]
            try:
                report = services.transcripts_import(
                    upload.read(services.import_limit() + 1),
                    format=form.cleaned_data["format"],
                    rubric=form.cleaned_data["rubric"].slug if form.cleaned_data["rubric"] else None,
                    file=upload.name,
                    source=form.cleaned_data["source"],
                    annotator=form.cleaned_data["annotator"],
                    speaker_separator=form.cleaned_data["speaker_separator"] or ":",
                    transcript_separator=form.cleaned_data["transcript_separator"] or "---",
                    label_map=label_map.read(services.import_limit() + 1) if label_map else None,
                    skip_invalid=form.cleaned_data["skip_invalid"],
                )
            except (InvalidInput, NotFound) as exc:
                problems = getattr(exc, "problems", None) or [exc]
                for problem in problems[:50]:
                    form.add_error(None, str(problem))
                if len(problems) > 50:
                    form.add_error(None, f"... and {len(problems) - 50} more problems; nothing was stored.")
            else:
                summary, *rejected = report.lines()
                self.message_user(request, summary, messages.SUCCESS)
                for line in rejected:
                    self.message_user(request, line, messages.WARNING)
                return redirect("admin:evaluation_transcript_changelist")
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Import transcripts",
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/evaluation/transcript/upload.html", context)


class AnnotationForm(forms.ModelForm):
    value = forms.CharField(help_text="A category of the dimension's scale, or an integer in its range.")

    class Meta:
        model = Annotation
        fields = ("item", "dimension", "value")


def item_column():
    """A list column of a label's or score's item as its transcript and key ("example-1 / GPT4"), which may wrap
    at the slash; the source is a filter and the whole name is on hover."""

    @admin.display(description="item", ordering="item")
    def column(self, obj):
        item = obj.item
        name = f"{item.transcript.external_id} / {item.key}" if item.key else item.transcript.external_id
        return format_html('<span title="{}">{}</span>', item, name)

    return column


def dimension_column():
    """A list column of a label's or score's dimension by its words ("Mistake identification"): the rubric is
    a filter, and `tutor-response.Mistake_Identification` on every row widened the lists past their box."""

    @admin.display(description="dimension", ordering="dimension__name")
    def column(self, obj):
        return format_html('<span title="{}">{}</span>', obj.dimension, label(obj.dimension.name))

    return column


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    """A label saved here is the signed-in user's (annotator = their user name)."""

    form = AnnotationForm
    list_display = ("item_name", "dimension_name", "value", "version", "annotator", "updated_at")
    list_select_related = ("item__transcript", "dimension__rubric", "rubric_version")
    list_filter = ("dimension__rubric", "rubric_version", "dimension", "annotator")
    search_fields = ("item__transcript__external_id", "annotator")
    raw_id_fields = ("item",)

    item_name = item_column()
    dimension_name = dimension_column()

    @admin.display(description="rubric version", ordering="rubric_version__number")
    def version(self, obj):
        return f"v{obj.rubric_version.number}" if obj.rubric_version_id else "-"

    def save_model(self, request, obj, form, change):
        try:
            saved = services.annotation_set(
                item_id=obj.item_id, dimension_id=obj.dimension_id, value=form.cleaned_data["value"], user=request.user
            )
        except InvalidInput as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        obj.pk = saved.pk


class AnnotationInline(admin.TabularInline):
    model = Annotation
    extra = 0
    # The dimension, version and user as text: Django links a read-only related field to its admin page
    # whatever the reader may open, and a viewer may not open rubric versions or users (a broken link).
    fields = ("dimension_text", "version", "value", "annotator", "user_name")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="dimension")
    def dimension_text(self, obj):
        return str(obj.dimension)

    @admin.display(description="rubric version")
    def version(self, obj):
        return str(obj.rubric_version) if obj.rubric_version_id else "-"

    @admin.display(description="user")
    def user_name(self, obj):
        return obj.user.get_username() if obj.user_id else "-"


class LabelForm(forms.ModelForm):
    """The signed-in user's labels of one item: a field per dimension of every rubric of the item's unit."""

    class Meta:
        model = Item
        fields = ()


def label_form(item, user) -> type[LabelForm]:
    fields = {}
    # the user's labels under each rubric's current version: one made under an earlier version is not on its scale
    mine = {
        a.dimension_id: a.value
        for a in item.annotations.filter(annotator=user.get_username()).select_related(
            "rubric_version", "dimension__rubric"
        )
        if a.rubric_version.number == a.dimension.rubric.version
    }
    for dim in selectors.dimensions_for_item(item):
        fields[f"label_{dim.pk}"] = forms.ChoiceField(
            choices=[("", "-")] + [(c, c) for c in selectors.scale_levels(dim)],
            required=False,
            initial=mine.get(dim.pk, ""),
            label=f"{dim.rubric.slug}: {dim.name}",
            help_text=dim.question,
        )
    return type("ItemLabelForm", (LabelForm,), fields)


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    """Staff label an item here; several annotators per item are kept apart."""

    form = LabelForm
    list_display = ("__str__", "key", "transcript_link", "label_count")
    list_filter = ("transcript__source",)
    search_fields = ("transcript__external_id", "key")
    readonly_fields = ("transcript_link", "context", "response")
    inlines = [AnnotationInline]
    actions = ["mark_canary"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("transcript").annotate(n_labels=Count("annotations"))

    def has_change_permission(self, request, obj=None):
        # Changing an item here means labelling it: the permission to add annotations is the one that counts.
        return request.user.has_perm("evaluation.add_annotation")

    def get_fields(self, request, obj=None):
        labels = list(label_form(obj, request.user).base_fields) if obj is not None else []
        return ["transcript_link", "context", "response", *labels]

    def get_form(self, request, obj=None, change=False, **kwargs):
        return label_form(obj, request.user) if obj is not None else LabelForm

    @admin.display(description="Labels", ordering="n_labels")
    def label_count(self, obj):
        return obj.n_labels

    @admin.display(description="Transcript")
    def transcript_link(self, obj):
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:evaluation_transcript_change", args=[obj.transcript_id]),
            obj.transcript,
        )

    @admin.display(description="Conversation")
    def context(self, obj):
        return format_html_join(
            "",
            "<p><strong>{}</strong>: {}</p>",
            ((m.get("role", ""), m.get("content", "")) for m in obj.transcript.messages),
        )

    def save_model(self, request, obj, form, change):
        for name, value in form.cleaned_data.items():
            if name.startswith("label_") and value:
                services.annotation_set(item_id=obj.pk, dimension_id=int(name[6:]), value=value, user=request.user)

    @admin.action(description="Mark the selected items as their rubric's canary set")
    def mark_canary(self, request, queryset):
        unit = {"session" if not i.key else "response" for i in queryset}
        for rubric in Rubric.objects.filter(unit__in=unit):
            try:
                canary = services.canary_set(
                    name=f"{rubric.slug}-canary", rubric=rubric.slug, item_ids=[i.pk for i in queryset]
                )
            except InvalidInput as exc:
                self.message_user(request, f"{rubric.slug}: {exc}", messages.WARNING)
            else:
                self.message_user(request, f"{canary.name}: {canary.items.count()} items", messages.SUCCESS)


@admin.register(JudgeConfiguration)
class JudgeConfigurationAdmin(admin.ModelAdmin):
    list_display = ("key", "rubric", "provider", "rubric_version", "score_count", "card", "created_at")
    list_filter = ("rubric", "provider")
    readonly_fields = ("key", "rubric", "provider", "prompt_hash", "rubric_version", "created_at")

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_scores=Count("scores"))

    @admin.display(description="Scores", ordering="n_scores")
    def score_count(self, obj):
        return obj.n_scores

    @admin.display(description="Judge card")
    def card(self, obj):
        return format_html('<a href="{}">card</a>', reverse("evaluation-judge-card", args=[obj.pk]))


@admin.register(JudgeScore)
class JudgeScoreAdmin(admin.ModelAdmin):
    list_display = ("item_name", "dimension_name", "value", "repeat", "judge", "created_at")
    list_select_related = ("item__transcript", "dimension__rubric", "configuration")
    list_filter = ("configuration", "dimension__rubric", "dimension", "repeat")
    search_fields = ("item__transcript__external_id",)
    readonly_fields = ("item", "dimension", "configuration", "repeat", "value", "score", "rationale", "created_at")
    item_name = item_column()
    dimension_name = dimension_column()

    @admin.display(description="judge", ordering="configuration__provider")
    def judge(self, obj):
        """The judge's provider/model, its whole configuration key (prompt hash, rubric version) on hover."""
        return format_html('<span title="{}">{}</span>', obj.configuration.key, obj.configuration.provider)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(CanarySet)
class CanarySetAdmin(admin.ModelAdmin):
    list_display = ("name", "rubric", "item_count", "created_at")
    list_filter = ("rubric",)
    raw_id_fields = ("items",)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_items=Count("items"))

    @admin.display(description="Items", ordering="n_items")
    def item_count(self, obj):
        return obj.n_items
