"""Admin for personas, topics and agents."""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from evaluation import limits
from evaluation.conf import setting
from evaluation.models import Agent, AgentEvaluationConfig, Persona, Topic, TutoringSession
from evaluation.tutoring import selectors as tutoring_selectors
from evaluation.tutoring.selectors import persona_schema
from evaluation.tutoring.services import PERSONA_KEYS, validate_persona, validate_topic


class SchemaValidatedForm(forms.ModelForm):
    """Validates the whole record against its file schema and the catalogue's size limits (the same
    as a catalogue file's: docs/limits.md); each problem lands on its field."""

    known_keys: tuple[str, ...] = ()
    error_targets: dict[str, str] = {}
    """A schema path (`response_style.max_words`) to the form field that edits it."""

    def validate_document(self, data):  # pragma: no cover - overridden
        raise NotImplementedError

    def clean(self):
        cleaned = super().clean()
        document = {k: cleaned.get(k) for k in self.known_keys if k in cleaned and cleaned.get(k) is not None}
        for problem in [*limits.value_problems(document), *self.validate_document(document)]:
            top = problem.field.split(".")[0]
            target = self.error_targets.get(problem.field) or self.error_targets.get(top) or top
            message = f"{problem.field}: {problem.reason}" if "." in problem.field else problem.reason
            if target in self.fields and target not in self.errors:
                self.add_error(target, message)
            elif target not in self.fields:
                self.add_error(None, f"{problem.field}: {problem.reason}")
        return cleaned


class LinesField(forms.CharField):
    """A list of strings, edited one per line (blank lines dropped)."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 80})

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(str(v) for v in value)
        return value

    def to_python(self, value):
        if isinstance(value, list):
            return value
        return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def _doc(schema: dict, *path: str) -> str:
    """The schema's description of a property (the form's help text)."""
    node = schema
    for key in path:
        node = node.get("properties", {}).get(key, {})
    return node.get("description", "")


def _default_trigger() -> str:
    """When a behaviour's chance is rolled unless its file says otherwise (the schema's default)."""
    return str(persona_schema()["$defs"]["behaviour"]["properties"]["trigger"]["default"])


STYLE_FIELDS = {"style_max_words": "max_words", "style_language": "language", "style_examples": "examples"}
"""Form field -> response_style key; other response_style keys stay in style_other (JSON)."""


def _persona_form_fields() -> dict[str, forms.Field]:
    """Structured fields for a persona's traits, style and behaviours, with personas/schema.json's help text."""
    schema = persona_schema()
    one_per_line = " One per line."
    fields: dict[str, forms.Field] = {
        "personality_traits": LinesField(required=False, help_text=_doc(schema, "personality_traits") + one_per_line),
        "common_mistakes": LinesField(required=False, help_text=_doc(schema, "common_mistakes") + one_per_line),
        "behavioral_notes": LinesField(required=False, help_text=_doc(schema, "behavioral_notes") + one_per_line),
        "style_max_words": forms.IntegerField(
            label="Max words", min_value=1, max_value=500, help_text=_doc(schema, "response_style", "max_words")
        ),
        "style_language": forms.CharField(
            label="Language", required=False, help_text=_doc(schema, "response_style", "language")
        ),
        "style_examples": LinesField(
            label="Examples", required=False, help_text=_doc(schema, "response_style", "examples") + one_per_line
        ),
        "style_other": forms.JSONField(
            label="Other style keys",
            widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
            required=False,
            help_text="Keys of response_style this form has no field for, as JSON; kept as they are.",
        ),
    }
    behaviours = schema["properties"]["persona_specific_behaviors"].get("properties", {})
    triggers = schema["$defs"]["behaviour"]["properties"]["trigger"]
    for key in behaviours:
        label = key.removesuffix("_probability").replace("_", " ").capitalize()
        fields[f"behaviour_{key}"] = forms.FloatField(
            label=label,
            required=False,
            min_value=0,
            max_value=1,
            help_text=_doc(schema, "persona_specific_behaviors", key) + " Chance, 0 to 1; empty: never.",
        )
        fields[f"trigger_{key}"] = forms.ChoiceField(
            label=f"{label}: when",
            choices=[(t, t.replace("_", " ")) for t in triggers["enum"]],
            initial=triggers["default"],
            required=False,
            help_text="The turns on which the chance is rolled.",
        )
    fields["other_behaviors"] = forms.JSONField(
        label="Other behaviours",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        required=False,
        help_text=_doc(schema, "persona_specific_behaviors") + " Behaviours without a field above, as JSON.",
    )
    return fields


class PersonaForm(SchemaValidatedForm):
    """A persona with structured fields for its lists, response style and behaviours (JSON only for
    keys the schema does not name)."""

    known_keys = PERSONA_KEYS
    error_targets = {
        "response_style.max_words": "style_max_words",
        "response_style.language": "style_language",
        "response_style.examples": "style_examples",
        "response_style": "style_other",
        "persona_specific_behaviors": "other_behaviors",
    }

    class Meta:
        model = Persona
        # response_style and persona_specific_behaviors are assembled from the structured fields in clean()
        fields = (
            "persona_id",
            "name",
            "grade",
            "age",
            "description",
            "correct_answer_probability",
            "personality_traits",
            "common_mistakes",
            "behavioral_notes",
            "grounding",
            "extra",
        )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        style = dict(self.instance.response_style or {})
        for name, key in STYLE_FIELDS.items():
            self.initial.setdefault(name, style.pop(key, None))
        self.initial.setdefault("style_other", style)
        behaviours = dict(self.instance.persona_specific_behaviors or {})
        for name in self.fields:
            if name.startswith("behaviour_"):
                key = name.removeprefix("behaviour_")
                value = behaviours.pop(key, None)
                if isinstance(value, dict):  # {"probability": p, "trigger": t}
                    self.initial.setdefault(f"trigger_{key}", value.get("trigger") or _default_trigger())
                    value = value.get("probability")
                self.initial.setdefault(name, value)
        self.initial.setdefault("other_behaviors", behaviours)

    def clean(self):
        data = self.cleaned_data
        style = dict(data.get("style_other") or {}) if isinstance(data.get("style_other") or {}, dict) else None
        if style is None:
            self.add_error("style_other", "must be a JSON object")
            style = {}
        for name, key in STYLE_FIELDS.items():
            value = data.get(name)
            if value not in (None, "", []):
                style[key] = value
        other = data.get("other_behaviors") or {}
        if not isinstance(other, dict):
            self.add_error("other_behaviors", "must be a JSON object of behaviour names and chances")
            other = {}
        behaviours = dict(other)
        for name in self.fields:
            if name.startswith("behaviour_") and data.get(name) is not None:
                key = name.removeprefix("behaviour_")
                trigger = data.get(f"trigger_{key}") or _default_trigger()
                behaviours[key] = (
                    data[name] if trigger == _default_trigger() else {"probability": data[name], "trigger": trigger}
                )
        data["response_style"] = style
        data["persona_specific_behaviors"] = behaviours
        self.instance.response_style = style
        self.instance.persona_specific_behaviors = behaviours
        return super().clean()

    def validate_document(self, data):
        if not data.get("grounding"):  # an empty grounding is "not grounded", as a file without the key
            data = {k: v for k, v in data.items() if k != "grounding"}
        return validate_persona(data)


_structured = _persona_form_fields()
PersonaForm.base_fields.update(_structured)
PersonaForm.declared_fields.update(_structured)


class TopicForm(SchemaValidatedForm):
    """A topic with its objectives and misconceptions edited one per line, as a persona's lists are."""

    known_keys = ("topic_id", "name", "grade", "learning_objectives", "common_misconceptions")
    learning_objectives = LinesField(
        required=False, help_text="What a student should be able to do after the session. One per line."
    )
    common_misconceptions = LinesField(
        required=False, help_text="Mistakes students often make on this topic. One per line."
    )

    class Meta:
        model = Topic
        fields = "__all__"

    def validate_document(self, data):
        return validate_topic(data)


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    form = PersonaForm
    list_display = ("persona_id", "name", "grade", "correct_answer_probability", "runs_link", "updated_at")
    list_filter = ("grade",)
    search_fields = ("persona_id", "name", "description")
    readonly_fields = ("source_file", "updated_at", "realism")

    def get_fieldsets(self, request, obj=None):
        names = list(self.get_form(request, obj, fields=None).base_fields)
        behaviours = [n for n in names if n.startswith("behaviour_")] + ["other_behaviors"]
        return [
            (None, {"fields": ["persona_id", "name", "grade", "age", "description", "correct_answer_probability"]}),
            ("Traits", {"fields": ["personality_traits", "common_mistakes", "behavioral_notes"]}),
            ("Response style", {"fields": [*STYLE_FIELDS, "style_other"]}),
            ("Behaviours", {"fields": behaviours, "description": "Chance per turn that each behaviour fires."}),
            ("Grounding in real students", {"fields": ["grounding", "realism"]}),
            ("Other keys", {"fields": ["extra"], "classes": ["collapse"]}),
            ("File", {"fields": ["source_file", "updated_at"]}),
        ]

    @admin.display(description="Realism")
    def realism(self, obj):
        """The persona's realism card against the shipped real students, per simulator model."""
        if obj is None or obj.pk is None:
            return "-"
        url = reverse("evaluation-realism") + f"?persona={obj.persona_id}"
        lines = [(card.name, card.summary()) for card in tutoring_selectors.realism_cards(persona=obj.persona_id).cards]
        if not lines:
            return format_html('No completed simulated runs yet. <a href="{}">realism page</a>', url)
        items = format_html_join("", "<li><b>{}</b>: {}</li>", lines)
        return format_html('<ul class="realism">{}</ul><a href="{}">the whole card</a>', items, url)

    @admin.display(description="Runs")
    def runs_link(self, obj):
        url = reverse("evaluation-dashboard") + f"?persona={obj.persona_id}"
        return format_html('<a href="{}">runs</a>', url)


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    form = TopicForm
    list_display = ("topic_id", "name", "grade", "subject", "approved")
    list_filter = ("approved", "grade", "subject")
    search_fields = ("topic_id", "name", "description")
    readonly_fields = ("source_file", "updated_at")


class AgentEvaluationConfigInline(admin.StackedInline):
    model = AgentEvaluationConfig
    extra = 0
    max_num = 1


class AgentForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = "__all__"

    def clean_auth_header(self):
        name = self.cleaned_data.get("auth_header", "").strip()
        allowed = setting("ALLOWED_KEY_VARS")
        if name and name not in allowed:
            raise forms.ValidationError(
                f"{name} is not in EVAL_ALLOWED_KEY_VARS ({', '.join(allowed) or 'empty'}): its value would be sent "
                "to this agent's URL. Add it to that setting if it is meant for this agent."
            )
        return name


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = ("id", "display_name", "kind", "base_url", "model", "active", "drift_link")
    list_filter = ("kind", "active")
    search_fields = ("id", "display_name", "persona_spec")
    inlines = [AgentEvaluationConfigInline]

    @admin.display(description="Drift")
    def drift_link(self, obj):
        if obj.kind != "character":
            return "-"
        return format_html('<a href="{}">drift report</a>', reverse("evaluation-drift-agent", args=[obj.pk]))


@admin.register(TutoringSession)
class TutoringSessionAdmin(admin.ModelAdmin):
    list_display = ("session", "topic", "user", "is_complete", "message_count", "created_at")
    list_filter = ("is_complete", "topic")
    search_fields = ("id", "user")
    readonly_fields = ("full_conversation_log", "conversation_history", "state", "created_at", "updated_at")

    @admin.display(description="session", ordering="created_at")
    def session(self, obj):
        """A session's id's first 8 characters (the whole UUID on hover and on its page) tell sessions apart."""
        return format_html('<span title="{}">{}…</span>', obj.pk, str(obj.pk)[:8])

    @admin.display(description="Messages")
    def message_count(self, obj):
        return len(obj.full_conversation_log or obj.conversation_history or [])


@admin.register(AgentEvaluationConfig)
class AgentEvaluationConfigAdmin(admin.ModelAdmin):
    list_display = (
        "agent",
        "action_gate_enabled",
        "anti_convergence_enabled",
        "repetition_suppression_enabled",
        "updated_at",
    )
    list_filter = ("action_gate_enabled", "anti_convergence_enabled", "repetition_suppression_enabled")
    search_fields = ("agent__id",)
