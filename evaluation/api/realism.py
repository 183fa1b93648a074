"""Realism cards: simulated students (a persona's runs, a batch) or an imported set, against real students."""

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.api.schema import operation
from evaluation.api.serializers import Output, QueryInput
from evaluation.tutoring import selectors as tutoring

NAME = r"^[A-Za-z0-9_.:=@/ -]+$"


class RealismQuery(QueryInput):
    reference = serializers.RegexField(
        NAME,
        max_length=120,
        required=False,
        default=tutoring.DEFAULT_REFERENCE,
        help_text="bridge (the shipped table of real students), bridge:<split>, bridge:not-<split>, "
        "bridge:error=<type>, or an imported source name (imported:<name> when a shipped table has that name).",
    )
    persona = serializers.RegexField(
        r"^[a-z0-9_-]+$", max_length=64, required=False, default="all", help_text="A persona id, or all."
    )
    group = serializers.CharField(max_length=120, required=False, default="", help_text="Only this batch's runs.")
    transcripts = serializers.RegexField(
        NAME, max_length=120, required=False, default="", help_text="Card this imported set instead of personas."
    )
    acts = serializers.ChoiceField(
        ["rules", "judge"],
        required=False,
        default="rules",
        help_text="What gives each student turn its dialogue act: the rules (default), or the judge role's LLM "
        "(the rules when it is offline; each turn asked once per model in a process). A shipped table's acts are "
        "always the rules'; where the two sides' classifiers differ, the act measures are shown but not judged.",
    )


class MeasureOutput(Output):
    name = serializers.CharField()
    value = serializers.JSONField(help_text="The set's value: a median, a share, a mean, or {act: share}.")
    interval = serializers.JSONField(help_text="Its 95% cluster-bootstrap interval [lo, hi] (per act for acts).")
    reference_value = serializers.JSONField()
    reference_interval = serializers.JSONField()
    distance = serializers.FloatField(allow_null=True)
    distance_name = serializers.ChoiceField(["wasserstein", "difference", "jensen_shannon"])
    distance_interval = serializers.ListField(child=serializers.FloatField(allow_null=True), allow_null=True)
    flag = serializers.BooleanField(allow_null=True, help_text="null: not judged (too little data, or never flagged).")
    rule = serializers.CharField()
    note = serializers.CharField(help_text="The flag in plain words; empty when not flagged.")
    extra = serializers.JSONField(
        help_text="Lengths: mean, reference_mean, ks (the KS statistic); shares: counted turns."
    )


class CardOutput(Output):
    name = serializers.CharField()
    reference = serializers.CharField()
    turns = serializers.IntegerField()
    dialogues = serializers.IntegerField()
    reference_turns = serializers.IntegerField()
    reference_dialogues = serializers.IntegerField()
    unrealistic = serializers.BooleanField(allow_null=True, help_text="null: the set is too small to judge.")
    notes = serializers.ListField(child=serializers.CharField())
    acts_by = serializers.CharField(help_text='What gave the set\'s acts: "rules" or "llm:provider/model".')
    reference_acts_by = serializers.CharField(help_text="What gave the reference's acts.")
    measures = MeasureOutput(many=True)


class RealismOutput(Output):
    reference = serializers.CharField()
    acts_by = serializers.CharField(help_text='The classifier asked for: "rules" or "llm:provider/model".')
    act_calls = serializers.IntegerField(help_text="LLM calls made for the acts (cached turns cost none).")
    act_failures = serializers.IntegerField(help_text="Of those, calls that failed (their turns by the rules).")
    sets = CardOutput(many=True)


class RealismNoteOutput(Output):
    """A persona's simulated students, as played by one simulator model, unlike real ones (the realism card)."""

    persona_id = serializers.CharField()
    simulator = serializers.CharField(help_text="provider/model of the simulator role the runs recorded.")
    reference = serializers.CharField(help_text="The reference of real students, e.g. bridge.")
    runs = serializers.IntegerField(help_text="The persona's completed runs with that simulator the card read.")
    unrealistic = serializers.BooleanField()
    notes = serializers.ListField(child=serializers.CharField(), help_text="The flagged measures in plain words.")
    summary = serializers.CharField()


class RealismView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    @operation(
        operation_id="tutoring_realism",
        tag="tutoring",
        summary="Realism cards: simulated students against real ones",
        description="Per persona and simulator model (the completed simulated runs; one batch with `group`), or for "
        "one imported transcript set (`transcripts`): each student-turn measure beside the reference's, with 95% "
        "cluster-bootstrap intervals (resampling dialogues), a distance (Wasserstein-1 for lengths, the difference "
        "of shares, Jensen-Shannon for the dialogue acts) and a flag with its rule. A set with too few dialogues "
        "or turns is not judged (`unrealistic` null, `notes` says why).",
        parameters=[RealismQuery],
        ok={200: RealismOutput},
        invalid="A parameter is not valid, or the reference names no part of a shipped table.",
        not_found="The persona, group, imported source or reference does not exist.",
    )
    def get(self, request: Request) -> Response:
        query = RealismQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        cards = tutoring.realism_cards(**query.validated_data)
        return Response(RealismOutput(cards.as_dict()).data)
