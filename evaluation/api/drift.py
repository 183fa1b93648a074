"""Persona drift: ingest messages, start evaluations, and the runtime checks for external agents."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import limits
from evaluation.api.parsers import JSONParser
from evaluation.api.schema import body_example, operation, path_parameter
from evaluation.api.serializers import Output, RunAcceptedOutput
from evaluation.drift import services
from evaluation.models import AgentMessage

UNKNOWN_AGENT = "No agent has this id."


AGENT_ID = path_parameter("agent_id", "A character agent's id, e.g. `rex`.", example="rex")


class IngestOutput(Output):
    created = serializers.SerializerMethodField(help_text="How many messages were stored.")

    def get_created(self, messages: list[AgentMessage]) -> int:
        return len(messages)


class IngestView(APIView):
    required_permission = "evaluation.add_agentmessage"

    @operation(
        operation_id="drift_messages_ingest",
        tag="drift",
        summary="Ingest character agents' messages",
        description="Messages as one JSON object, a JSON list (application/json) or JSON lines "
        "(application/x-ndjson). Every record is checked first; any problem, named by its index or "
        "line and field, stores nothing.",
        request={"application/json": services.DriftMessageInput(many=True), "application/x-ndjson": OpenApiTypes.STR},
        ok={201: IngestOutput},
        invalid="A record is not valid: `fields` names it (`[2].agent`, `line 5`) and why; nothing was stored.",
        body=True,
        examples=[
            # a list body: the schema's list mechanics make this one record the body's only item
            body_example(
                "messages",
                "One of the cast's messages",
                {
                    "agent": "rex",
                    "channel": "general",
                    "text": "Sign's the least of it. The hose reel is cracked again. Who's fixing it? Me.",
                    "time": "2026-10-01T18:37:00Z",
                },
            )
        ],
    )
    def post(self, request: Request) -> Response:
        # The ingest service parses the raw body itself: it accepts JSON lines and names each bad line.
        created = services.messages_ingest_body(request.body)
        return Response(IngestOutput(created).data, status=status.HTTP_201_CREATED)


@extend_schema_serializer(
    examples=[
        body_example(
            "every_dimension", "The newest 20 messages, every dimension, judged offline", {"judge": "offline"}
        ),
        body_example(
            "two_dimensions",
            "Two dimensions on a larger sample",
            {"dimensions": ["adherence", "consistency"], "sample_size": 50, "judge": "offline"},
        ),
    ]
)
class DriftEvaluateInput(serializers.Serializer):
    dimensions = serializers.ListField(
        child=limits.StringField(),
        required=False,
        help_text="adherence, consistency, fluency, convergence, or any dimension with propositions loaded "
        "(default: all of them).",
    )
    sample_size = serializers.IntegerField(default=20, min_value=1, max_value=500)
    judge = limits.StringField(
        required=False, allow_blank=True, default="", help_text="The proposition judge's provider."
    )


class DriftEvaluateView(APIView):
    required_permission = "evaluation.start_run"
    parser_classes = [JSONParser]

    @operation(
        operation_id="drift_agents_evaluate",
        tag="drift",
        summary="Start a drift evaluation",
        description="Scores the agent's newest messages on each dimension in the background.",
        parameters=[AGENT_ID],
        request=DriftEvaluateInput,
        ok={202: RunAcceptedOutput},
        invalid="An unknown dimension, sample_size out of range, or a judge that is unknown or lacks its API key.",
        not_found=UNKNOWN_AGENT,
        conflict="As many runs already wait as EVAL_MAX_QUEUED_RUNS allows; try again later.",
        body=True,
    )
    def post(self, request: Request, agent_id: str) -> Response:
        body = DriftEvaluateInput(data=request.data)
        body.is_valid(raise_exception=True)
        run = services.drift_run_start(
            user=request.user,
            agent_id=agent_id,
            dimensions=body.validated_data.get("dimensions"),
            sample_size=body.validated_data["sample_size"],
            judge=body.validated_data["judge"] or None,
        )
        return Response(RunAcceptedOutput(run).data, status=status.HTTP_202_ACCEPTED)


@extend_schema_serializer(
    examples=[
        body_example(
            "first_draft",
            "A first draft of a message",
            {"text": "Fixed the hose reel myself. Again.", "channel": "general", "attempt": 1},
        )
    ]
)
class GateInput(serializers.Serializer):
    text = limits.StringField(help_text="The message the runtime is about to commit.")
    channel = limits.StringField()
    attempt = serializers.IntegerField(default=1, min_value=1, max_value=20, help_text="1 for the first draft.")
    original_text = limits.StringField(
        required=False, allow_blank=True, default="", help_text="The first draft, on later attempts."
    )


class GateOutput(Output):
    commit = serializers.BooleanField(help_text="True: send the message; false: rewrite it with `feedback`.")
    score = serializers.FloatField(allow_null=True, help_text="0-9; null when the gate is off or unscored.")
    threshold = serializers.FloatField()
    attempt = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    reasoning = serializers.CharField()
    feedback = serializers.CharField()
    outcome = serializers.CharField(allow_null=True, help_text="How a correction ended, once it has.")


class GateView(APIView):
    required_permission = "evaluation.use_corrections"
    parser_classes = [JSONParser]
    waits_on_an_llm = True  # outside the web process's limit on requests at once (evaluation/web/concurrency.py)

    @operation(
        operation_id="drift_agents_gate",
        tag="drift",
        summary="Gate a message before it is sent",
        description="The action gate for an external runtime that drives its own retries: commit, "
        "or retry with feedback. Answers commit when the gate is off for the agent.",
        parameters=[AGENT_ID],
        request=GateInput,
        ok={200: GateOutput},
        invalid="A field is missing or out of range.",
        not_found=UNKNOWN_AGENT,
        body=True,
    )
    def post(self, request: Request, agent_id: str) -> Response:
        body = GateInput(data=request.data)
        body.is_valid(raise_exception=True)
        decision = services.gate(agent_id=agent_id, **body.validated_data)
        return Response(GateOutput(decision).data)


@extend_schema_serializer(
    examples=[body_example("channel", "Before the agent speaks in #general", {"channel": "general"})]
)
class PreInvocationInput(serializers.Serializer):
    channel = limits.StringField()


class PreInvocationOutput(Output):
    nudge = serializers.CharField(allow_null=True, help_text="An anti-convergence nudge, or null.")
    avoid_phrases = serializers.ListField(child=serializers.CharField(), help_text="Phrases the agent overuses.")
    recent_messages = serializers.ListField(
        child=serializers.CharField(),
        help_text="The agent's recent messages that repeat themselves (empty unless phrases are listed).",
    )


class PreInvocationView(APIView):
    required_permission = "evaluation.use_corrections"
    parser_classes = [JSONParser]

    @operation(
        operation_id="drift_agents_pre_invocation",
        tag="drift",
        summary="What to add to the agent's next prompt",
        description="A nudge (anti-convergence), and the agent's recent messages with the phrases to avoid "
        "(repetition suppression); any may be empty. Transient: nothing is stored in the agent's messages.",
        parameters=[AGENT_ID],
        request=PreInvocationInput,
        ok={200: PreInvocationOutput},
        invalid="channel is missing.",
        not_found=UNKNOWN_AGENT,
        body=True,
    )
    def post(self, request: Request, agent_id: str) -> Response:
        body = PreInvocationInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(
            PreInvocationOutput(
                services.pre_invocation_for(agent_id=agent_id, channel=body.validated_data["channel"])
            ).data
        )
