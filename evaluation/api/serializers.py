"""Request shapes for the evaluation API."""

from rest_framework import serializers


class StartSerializer(serializers.Serializer):
    topic_id = serializers.CharField()
    persona_file = serializers.CharField(required=False, help_text="'ace.json', 'ace' or 'all'")
    persona = serializers.CharField(required=False, help_text="Alias of persona_file")
    max_turns = serializers.IntegerField(default=20, min_value=1, max_value=100)
    runs_per_persona = serializers.IntegerField(default=1, min_value=1, max_value=20)
    seed = serializers.IntegerField(required=False, allow_null=True, default=None)
    target = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Agent id (default: the reference tutor)"
    )
    provider = serializers.CharField(required=False, allow_blank=True, default="")
    cost_limit_usd = serializers.FloatField(required=False, allow_null=True, default=None, min_value=0)


class EvaluateSessionSerializer(serializers.Serializer):
    session_id = serializers.UUIDField()
    provider = serializers.CharField(required=False, allow_blank=True, default="")


class SuiteRunSerializer(serializers.Serializer):
    model = serializers.CharField(required=False, allow_blank=True, default="")
    judge_model = serializers.CharField(required=False, allow_blank=True, default="")
    judge = serializers.BooleanField(required=False, default=True)
