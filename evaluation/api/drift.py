"""Drift API: ingest messages, start evaluations, and the runtime-correction checks for external agents."""

from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from evaluation.drift import services


class GateSerializer(serializers.Serializer):
    text = serializers.CharField()
    channel = serializers.CharField()
    attempt = serializers.IntegerField(default=1, min_value=1, max_value=20)
    original_text = serializers.CharField(required=False, allow_blank=True, default="")


class PreInvocationSerializer(serializers.Serializer):
    channel = serializers.CharField()


class EvaluateSerializer(serializers.Serializer):
    dimensions = serializers.ListField(child=serializers.CharField(), required=False)
    sample_size = serializers.IntegerField(default=20, min_value=1, max_value=500)
    judge = serializers.CharField(required=False, allow_blank=True, default="")


@api_view(["POST"])
def ingest(request: Request) -> Response:
    """Messages as one JSON object, a JSON list, or JSON lines (application/x-ndjson); all or nothing."""
    created = services.messages_ingest_body(request.body)
    return Response({"created": len(created)}, status=status.HTTP_201_CREATED)


@api_view(["POST"])
def evaluate(request: Request, agent_id: str) -> Response:
    body = EvaluateSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    run = services.drift_run_start(
        agent_id=agent_id,
        dimensions=body.validated_data.get("dimensions"),
        sample_size=body.validated_data["sample_size"],
        judge=body.validated_data["judge"] or None,
    )
    return Response({"run_id": run.run_id, "status": run.status}, status=status.HTTP_202_ACCEPTED)


@api_view(["POST"])
def gate(request: Request, agent_id: str) -> Response:
    """Score a message before the runtime commits it: {commit, score, threshold, feedback, ...}."""
    body = GateSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    decision = services.gate(agent_id=agent_id, **body.validated_data)
    return Response(decision.__dict__)


@api_view(["POST"])
def pre_invocation_view(request: Request, agent_id: str) -> Response:
    """What to add to the agent's next system prompt: a nudge and phrases to avoid (either may be empty)."""
    body = PreInvocationSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return Response(services.pre_invocation_for(agent_id=agent_id, channel=body.validated_data["channel"]))
