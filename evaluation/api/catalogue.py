"""The catalogue, read-only: topics, personas and agents, so an integration can find the ids a start names.

Agents are shown without anything secret: not the environment variable behind their Authorization
header, nor credentials or query strings in their base URL, nor their extra settings.
"""

from urllib.parse import urlsplit, urlunsplit

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.api.pagination import Pagination, paginated
from evaluation.api.schema import operation, path_parameter
from evaluation.api.serializers import Output, QueryInput
from evaluation.models import Agent
from evaluation.runs import selectors as run_selectors
from evaluation.tutoring import selectors as tutoring_selectors

PAGE = "A filter or page parameter is not valid (e.g. `limit=abc`)."


# --- topics ----------------------------------------------------------------------------------


class TopicFilterInput(QueryInput):
    grade = serializers.IntegerField(required=False, min_value=1, max_value=12)
    subject = serializers.CharField(required=False)
    approved = serializers.BooleanField(required=False)


class TopicOutput(Output):
    topic_id = serializers.CharField()
    name = serializers.CharField()
    grade = serializers.IntegerField()
    subject = serializers.CharField()
    description = serializers.CharField()
    learning_objectives = serializers.ListField(child=serializers.CharField())
    common_misconceptions = serializers.ListField(child=serializers.CharField())
    approved = serializers.BooleanField()


class TopicListView(APIView):
    required_permission = "evaluation.view_topic"
    pagination_class = Pagination

    @operation(
        operation_id="catalogue_topics_list",
        tag="catalogue",
        summary="List topics",
        description="Topics a simulated run can teach (`topic_id` of a start), by grade then id.",
        parameters=[TopicFilterInput],
        ok={200: TopicOutput(many=True)},
        invalid=PAGE,
    )
    def get(self, request: Request) -> Response:
        filters = TopicFilterInput(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return paginated(self, request, tutoring_selectors.topic_list(**filters.validated_data), TopicOutput)


class TopicDetailView(APIView):
    required_permission = "evaluation.view_topic"

    @operation(
        operation_id="catalogue_topics_retrieve",
        tag="catalogue",
        summary="One topic",
        description="A topic with the context the judge is given.",
        parameters=[path_parameter("topic_id", "A topic id, e.g. `comparing-decimals`.")],
        ok={200: TopicOutput},
        not_found="No topic has this id.",
    )
    def get(self, request: Request, topic_id: str) -> Response:
        return Response(TopicOutput(tutoring_selectors.topic_get(topic_id)).data)


# --- personas --------------------------------------------------------------------------------


class PersonaFilterInput(QueryInput):
    grade = serializers.IntegerField(required=False, min_value=1, max_value=12)


class PersonaOutput(Output):
    persona_id = serializers.CharField(help_text="What a start's persona_file names (with or without '.json').")
    name = serializers.CharField()
    grade = serializers.IntegerField()
    age = serializers.IntegerField(allow_null=True)
    description = serializers.CharField()
    correct_answer_probability = serializers.FloatField()
    personality_traits = serializers.ListField(child=serializers.CharField())
    common_mistakes = serializers.ListField(child=serializers.CharField())
    response_style = serializers.DictField(help_text='Holds "max_words"; may hold language, examples.')
    behavioral_notes = serializers.ListField(child=serializers.CharField())
    persona_specific_behaviors = serializers.DictField()


class PersonaListView(APIView):
    required_permission = "evaluation.view_persona"
    pagination_class = Pagination

    @operation(
        operation_id="catalogue_personas_list",
        tag="catalogue",
        summary="List personas",
        description="The simulated students, by id.",
        parameters=[PersonaFilterInput],
        ok={200: PersonaOutput(many=True)},
        invalid=PAGE,
    )
    def get(self, request: Request) -> Response:
        filters = PersonaFilterInput(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return paginated(self, request, tutoring_selectors.persona_list(**filters.validated_data), PersonaOutput)


class PersonaDetailView(APIView):
    required_permission = "evaluation.view_persona"

    @operation(
        operation_id="catalogue_personas_retrieve",
        tag="catalogue",
        summary="One persona",
        description="A simulated student: its description, answer accuracy, mistakes and response style.",
        parameters=[path_parameter("persona_id", "A persona id, e.g. `ace` (or `ace.json`).")],
        ok={200: PersonaOutput},
        not_found="No persona has this id.",
    )
    def get(self, request: Request, persona_id: str) -> Response:
        return Response(PersonaOutput(tutoring_selectors.persona_get(persona_id)).data)


# --- agents ----------------------------------------------------------------------------------


class AgentFilterInput(QueryInput):
    kind = serializers.ChoiceField(
        Agent.Kind.choices,
        required=False,
        help_text="`protocol` also lists the reference tutor, which is served over the session protocol.",
    )
    active = serializers.BooleanField(required=False)


class PublicURLField(serializers.CharField):
    """A URL without its user, password, query or fragment: where the agent is, never how to log in."""

    def to_representation(self, value: str) -> str:
        if not value:
            return ""
        parts = urlsplit(value)
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        try:
            netloc = f"{host}:{parts.port}" if parts.port else host
        except ValueError:  # a port that is not a number
            netloc = host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class AgentOutput(Output):
    id = serializers.CharField(help_text="What a start's `target`, or a drift path's agent id, names.")
    display_name = serializers.CharField()
    kind = serializers.ChoiceField(Agent.Kind.choices)
    base_url = PublicURLField(help_text="Protocol server or OpenAI-compatible base URL, without credentials.")
    model = serializers.CharField()
    active = serializers.BooleanField()
    sends_authorization = serializers.SerializerMethodField(
        help_text="True when the agent is called with an Authorization header (its value is never shown)."
    )

    def get_sends_authorization(self, agent: Agent) -> bool:
        return bool(agent.auth_header)


class AgentListView(APIView):
    required_permission = "evaluation.view_agent"
    pagination_class = Pagination

    @operation(
        operation_id="catalogue_agents_list",
        tag="catalogue",
        summary="List agents",
        description="Agents under test: tutors (a start's `target`: the built-in reference tutor, `reference`, "
        "protocol servers and openai_chat endpoints) and character agents (persona drift). Filter with "
        "`kind` and `active`; `kind=protocol` lists every tutor reached over the session protocol, the "
        "reference tutor included.",
        parameters=[AgentFilterInput],
        ok={200: AgentOutput(many=True)},
        invalid=PAGE,
    )
    def get(self, request: Request) -> Response:
        filters = AgentFilterInput(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return paginated(self, request, run_selectors.agent_list(**filters.validated_data), AgentOutput)


class AgentDetailView(APIView):
    required_permission = "evaluation.view_agent"

    @operation(
        operation_id="catalogue_agents_retrieve",
        tag="catalogue",
        summary="One agent",
        description="An agent under test, without secrets.",
        parameters=[path_parameter("agent_id", "An agent id, e.g. `reference` (the built-in reference tutor).")],
        ok={200: AgentOutput},
        not_found="No agent has this id.",
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(AgentOutput(run_selectors.agent_get(agent_id)).data)
