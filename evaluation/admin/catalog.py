"""Admin for personas, topics and agents."""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from evaluation.conf import setting
from evaluation.models import Agent, AgentEvaluationConfig, Persona, Topic, TutoringSession
from evaluation.tutoring.services import PERSONA_KEYS, validate_persona, validate_topic


class SchemaValidatedForm(forms.ModelForm):
    """Validates the whole record against its file schema; each problem lands on its field."""

    known_keys: tuple[str, ...] = ()

    def validate_document(self, data):  # pragma: no cover - overridden
        raise NotImplementedError

    def clean(self):
        cleaned = super().clean()
        document = {k: cleaned.get(k) for k in self.known_keys if k in cleaned and cleaned.get(k) is not None}
        for problem in self.validate_document(document):
            top = problem.field.split(".")[0]
            message = f"{problem.field}: {problem.reason}" if "." in problem.field else problem.reason
            if top in self.fields and top not in self.errors:
                self.add_error(top, message)
            elif top not in self.fields:
                self.add_error(None, f"{problem.field}: {problem.reason}")
        return cleaned


class PersonaForm(SchemaValidatedForm):
    known_keys = PERSONA_KEYS

    class Meta:
        model = Persona
        fields = "__all__"

    def validate_document(self, data):
        return validate_persona(data)


class TopicForm(SchemaValidatedForm):
    known_keys = ("topic_id", "name", "grade", "learning_objectives", "common_misconceptions")

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
    readonly_fields = ("source_file", "updated_at")

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
    list_display = ("id", "topic", "user", "is_complete", "message_count", "created_at")
    list_filter = ("is_complete", "topic")
    search_fields = ("id", "user")
    readonly_fields = ("full_conversation_log", "conversation_history", "state", "created_at", "updated_at")

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
