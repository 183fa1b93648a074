"""Shapes shared by the API's operations: runs (summary, status, detail, export rows) and their filters."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from evaluation.conf import setting
from evaluation.models import EvaluationRun
from evaluation.models.runs import RootCause, RunKind, RunSource, RunStage, RunStatus, Severity
from evaluation.runs import selectors as run_selectors
from evaluation.tutoring import selectors as tutoring_selectors


class Output(serializers.Serializer):
    """An output shape: every field is in every response, so the schema marks each one required."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for field in fields.values():
            field.read_only = True
        return fields


class QueryInput(serializers.Serializer):
    """Query parameters, read as sent: an empty one (`?grade=`) is an empty value, refused by a field
    that does not allow blank (DRF's form reading would count it as absent), and one sent twice is
    refused rather than read as its last value. The schema then says what the server does."""

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "getlist"):
            counts = {name: len(data.getlist(name)) for name in self.fields.keys()}
            repeated = {name: count for name, count in counts.items() if count > 1}
            if repeated:
                raise serializers.ValidationError(
                    {name: [f"given {count} times; send it once"] for name, count in repeated.items()}
                )
            data = data.dict()
        return super().to_internal_value(data)


class IsoDateTimeField(serializers.DateTimeField):
    """ISO 8601 as Python writes it (`+00:00`), the form the first clients already read."""

    def to_representation(self, value: Any) -> Any:
        return value.isoformat() if hasattr(value, "isoformat") else value


class BlankAsNullField(serializers.CharField):
    """A text column where blank means 'none': answered as null."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)

    def to_representation(self, value: Any) -> str | None:  # type: ignore[override]
        return str(value) if value else None


# --- filters ---------------------------------------------------------------------------------


class RunFilterInput(QueryInput):
    """Query filters for runs; one left out matches all, an empty one is refused (it names nothing).
    Dates are whole UTC days, both inclusive."""

    kind = serializers.ChoiceField(RunKind.choices, required=False)
    source = serializers.ChoiceField(RunSource.choices, required=False)  # type: ignore[assignment]
    persona = serializers.CharField(required=False, help_text="A persona id, e.g. `ace`.")
    topic = serializers.CharField(required=False, help_text="A topic id.")
    agent = serializers.CharField(required=False, help_text="An agent id.")
    status = serializers.ChoiceField(RunStatus.choices, required=False)
    group = serializers.CharField(required=False, help_text="A multi-persona comparison id.")
    date_from = serializers.DateField(required=False, help_text="YYYY-MM-DD: created on or after.")
    date_to = serializers.DateField(required=False, help_text="YYYY-MM-DD: created on or before.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("date_from"), attrs.get("date_to")
        if start and end and start > end:
            raise serializers.ValidationError({"date_to": [f"{end} is before date_from ({start})"]})
        return attrs


class RunExportInput(RunFilterInput):
    format = serializers.ChoiceField(
        [("csv", "CSV"), ("json", "JSON")], default="json", help_text="`csv` (streamed) or `json`."
    )
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="At most this many runs, the newest first (default: every run the filters select, "
        "up to EXPORT_MAX_ROWS).",
    )

    def validate_limit(self, value: int) -> int:
        most = self.context.get("max_rows")
        if most is not None and value > most:
            raise serializers.ValidationError(f"{value} is more than an export may hold ({most}, EXPORT_MAX_ROWS)")
        return value


# --- runs ------------------------------------------------------------------------------------


STAGE = "Where the run is: queued, loading_persona, running_session, evaluating, generating_reports, then its end."
RUN_STATUS = "The lifecycle status: queued, running, completed, failed, interrupted or cancelled."
STAGE_ALIAS = (
    "The stage again (the same as `stage`), under the name the first polling clients read; "
    "not the lifecycle status, which is `run_status`."
)


class RunStatusOutput(Output):
    """A run's progress, for polling: `stage` is where it is, `run_status` its lifecycle status, the same
    two words a run's detail and the run list answer. `status` is the stage again, under the name the
    first polling clients read (kept; in a run's detail `status` is the lifecycle status)."""

    stage = serializers.ChoiceField(RunStage.choices, help_text=STAGE)
    run_status = serializers.ChoiceField(RunStatus.choices, source="status", help_text=RUN_STATUS)
    status = serializers.ChoiceField(RunStage.choices, source="stage", help_text=STAGE_ALIAS)
    run_id = serializers.CharField()
    kind = serializers.ChoiceField(RunKind.choices)
    attempt = serializers.IntegerField()
    detail = serializers.CharField(help_text="Progress in words, e.g. 'Turn 5/20'.")
    turn = serializers.IntegerField()
    max_turns = serializers.IntegerField()
    error = BlankAsNullField(help_text="Why the run failed; null unless it failed or was interrupted.")


CURRENT_STAGES = [("idle", "idle"), *RunStage.choices]


class CurrentStatusInput(QueryInput):
    run_id = serializers.CharField(required=False, help_text="One run's status instead of the newest.")
    kind = serializers.ChoiceField(
        RunKind.choices,
        required=False,
        help_text="Only runs of this kind (e.g. `tutor`); left out: every kind.",
    )


class CurrentStatusOutput(Output):
    """The newest active run's status (else the newest run's); `idle` with nulls when there is no run."""

    stage = serializers.ChoiceField(
        CURRENT_STAGES, source="run.stage", default="idle", help_text="The run's stage; `idle` when there is no run."
    )
    run_status = serializers.ChoiceField(
        RunStatus.choices, source="run.status", allow_null=True, default=None, help_text=RUN_STATUS
    )
    status = serializers.ChoiceField(CURRENT_STAGES, source="run.stage", default="idle", help_text=STAGE_ALIAS)
    run_id = serializers.CharField(source="run.run_id", allow_null=True, default=None)
    kind = serializers.ChoiceField(RunKind.choices, source="run.kind", allow_null=True, default=None)
    attempt = serializers.IntegerField(source="run.attempt", allow_null=True, default=None)
    detail = serializers.CharField(source="run.detail", default="")
    turn = serializers.IntegerField(source="run.turn", default=0)
    max_turns = serializers.IntegerField(source="run.max_turns", default=0)
    error = BlankAsNullField(source="run.error", default=None)
    active_runs = serializers.IntegerField(help_text="Runs queued or running now.")


class RunSummaryOutput(Output):
    """A run in the run list, of any kind. `status` is its lifecycle status (`run_status` again, the name
    the polling shapes use) and `stage` where it is."""

    run_id = serializers.CharField(help_text="Readable id; also the report folder name.")
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(RunKind.choices)
    timestamp = IsoDateTimeField(source="created_at")
    completed_at = IsoDateTimeField(allow_null=True)
    status = serializers.ChoiceField(RunStatus.choices, help_text="The lifecycle status (the same as `run_status`).")
    run_status = serializers.ChoiceField(RunStatus.choices, source="status", help_text=RUN_STATUS)
    stage = serializers.ChoiceField(RunStage.choices, help_text=STAGE)
    attempt = serializers.IntegerField()
    topic_id = serializers.CharField(source="topic.topic_id", allow_null=True)
    persona_id = serializers.CharField(source="persona.persona_id", allow_null=True)
    agent_id = serializers.CharField(allow_null=True)
    message_count = serializers.SerializerMethodField()
    avg_score = serializers.FloatField(source="overall_score", allow_null=True)
    scores = serializers.SerializerMethodField()
    source = serializers.ChoiceField(RunSource.choices)  # type: ignore[assignment]  # a declared field, not Field.source
    source_session_id = serializers.UUIDField(allow_null=True)
    group = BlankAsNullField(help_text="The multi-persona comparison this run belongs to.")
    repeat_index = serializers.IntegerField()

    def get_message_count(self, run: EvaluationRun) -> int:
        count = getattr(run, "message_count", None)
        return count if count is not None else run.messages.count()

    def get_scores(self, run: EvaluationRun) -> dict[str, float]:
        return run_selectors.run_scores(run)

    @staticmethod
    def summaries_data(summaries: list[run_selectors.RunSummary]) -> list[dict[str, Any]]:
        """The same JSON as RunSummaryOutput(runs, many=True).data, for the run list's page.

        DRF builds each field of each row through its field objects, most of a page's cost; the list
        reads plain values (run_summary_rows) and writes them here, field for field as declared above.
        """
        return [
            {
                "run_id": s.run_id,
                "id": str(s.id),
                "kind": s.kind,
                "timestamp": s.timestamp.isoformat(),
                "completed_at": s.completed_at.isoformat() if s.completed_at is not None else None,
                "status": s.status,
                "run_status": s.status,
                "stage": s.stage,
                "attempt": s.attempt,
                "topic_id": s.topic_id,
                "persona_id": s.persona_id,
                "agent_id": s.agent_id,
                "message_count": s.message_count,
                "avg_score": float(s.avg_score) if s.avg_score is not None else None,
                "scores": s.scores,
                "source": s.source,
                "source_session_id": str(s.source_session_id) if s.source_session_id is not None else None,
                "group": s.group or None,
                "repeat_index": s.repeat_index,
            }
            for s in summaries
        ]


class MessageOutput(Output):
    turn = serializers.IntegerField(
        help_text="The message's number in the transcript (1, 2, ...; pages call it 'Message N'). A run's progress "
        "counts student turns instead: its turn N is the student's Nth message."
    )
    role = serializers.CharField(help_text="tutor | student | system | agent")
    content = serializers.CharField()
    timestamp = serializers.DateTimeField()
    metadata = serializers.DictField(help_text="The simulator's turn decision, if any.")


class ProblemOutput(Output):
    rank = serializers.IntegerField()
    title = serializers.CharField()
    turns = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="The numbers of the messages the problem was seen in (a message's `turn`).",
    )
    description = serializers.CharField()
    quote = serializers.CharField()
    quote_found = serializers.BooleanField(help_text="False when the quote does not occur in the transcript.")
    severity = serializers.ChoiceField(Severity.choices)
    root_cause = serializers.ChoiceField(RootCause.choices)


class EvaluationOutput(Output):
    scores = serializers.DictField(child=serializers.FloatField())
    avg_score = serializers.FloatField(allow_null=True)
    dimension_analysis = serializers.DictField(child=serializers.CharField())
    problems = ProblemOutput(many=True)
    summary = serializers.CharField()
    judge = serializers.CharField(help_text="Who judged: provider/model.")
    offline = serializers.BooleanField(help_text="True when the offline rule-based judge gave the scores.")
    models = serializers.DictField(
        child=serializers.DictField(),
        help_text="Per role (simulator, tutor, judge): provider, model, source, temperature, seed, seed_sent.",
    )
    simulator_fidelity = serializers.DictField(
        allow_null=True,
        help_text="Simulated runs: realised vs target correct rate (Wilson 95% CI), answers contradicting their "
        "turn decision, requested behaviours shown, and whether the student strayed (null for real sessions).",
    )


class CoverageOutput(Output):
    """How much of its planned conversation a simulated run was judged on."""

    turns_answered = serializers.IntegerField(source="answered", help_text="Student turns the tutor answered.")
    max_turns = serializers.IntegerField(source="planned")
    cut_short = serializers.BooleanField(help_text="The tutor stopped answering or became unreachable early.")
    share = serializers.FloatField(help_text="1.0 when the conversation ended as planned.")
    counted = serializers.SerializerMethodField(
        help_text="Whether comparisons and gates count the run's scores (share >= EVAL_MIN_COVERAGE)."
    )

    def get_counted(self, coverage: tutoring_selectors.Coverage) -> bool:
        return coverage.share >= setting("MIN_COVERAGE")


class IntRangeOutput(Output):
    low = serializers.IntegerField(help_text="With typical replies.")
    high = serializers.IntegerField(help_text="With every reply at its role's max_tokens.")


class UsdRangeOutput(Output):
    low = serializers.FloatField(help_text="USD, with typical replies.")
    high = serializers.FloatField(help_text="USD, with every reply at its role's max_tokens.")


class ForecastRoleOutput(Output):
    role = serializers.CharField()
    provider = serializers.CharField()
    model = serializers.CharField()
    calls = serializers.IntegerField()
    input_tokens = IntRangeOutput()
    output_tokens = IntRangeOutput()
    direct_usd = UsdRangeOutput(allow_null=True, help_text="null: the model has no price.")
    batch_usd = UsdRangeOutput(allow_null=True, help_text="Through the vendor's batch API; null: no price.")
    free = serializers.BooleanField(help_text="The offline provider: nothing is sent or paid.")


class ForecastOutput(Output):
    """A price before the work: calls, tokens and cost, direct and by batch, at today's prices; nothing was
    created or sent."""

    dry_run = serializers.BooleanField(help_text="Always true: nothing was started.")
    calls = serializers.IntegerField()
    input_tokens = IntRangeOutput()
    output_tokens = IntRangeOutput()
    direct_usd = UsdRangeOutput(help_text="Without the unpriced models.")
    batch_usd = UsdRangeOutput(help_text="Without the unpriced models.")
    unpriced = serializers.ListField(
        child=serializers.CharField(), help_text="Models that would be paid for but have no price."
    )
    roles = ForecastRoleOutput(many=True)
    notes = serializers.ListField(child=serializers.CharField())
    text = serializers.CharField(help_text="The same forecast as lines of text.")


def forecast_body(found: Any) -> dict[str, Any]:
    """A Forecast (providers.forecast) as ForecastOutput's data."""
    return ForecastOutput({**found.as_dict(), "dry_run": True, "text": found.text()}).data


class RoleUsageOutput(Output):
    """One role's calls and tokens (cache-read and cache-write tokens are parts of input_tokens)."""

    role = serializers.CharField()
    calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    cached_input_tokens = serializers.IntegerField(help_text="Of input_tokens, read from the prompt cache.")
    cache_write_tokens = serializers.IntegerField(help_text="Of input_tokens, written to the prompt cache.")
    output_tokens = serializers.IntegerField(help_text="Thinking included.")
    thinking_tokens = serializers.IntegerField()


class UsageOutput(Output):
    """What a run's calls used and cost, from its recorded usage."""

    calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    cached_input_tokens = serializers.IntegerField(help_text="Of input_tokens, read from the prompt cache.")
    cache_write_tokens = serializers.IntegerField(help_text="Of input_tokens, written to the prompt cache.")
    output_tokens = serializers.IntegerField(help_text="Thinking included.")
    thinking_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField(help_text="Estimated from the price table; leaves out the unpriced models.")
    offline = serializers.BooleanField(help_text="Every call went to the offline provider: nothing was paid.")
    unpriced = serializers.ListField(
        child=serializers.CharField(), help_text="Models called that have no price: their calls are not in cost_usd."
    )
    by_role = RoleUsageOutput(many=True)


class RunDetailOutput(RunSummaryOutput):
    """One run: its summary, status, configuration, conversation, judgement and usage."""

    coverage = serializers.SerializerMethodField(help_text="Simulated tutor runs: turns answered of those planned.")

    status_detail = RunStatusOutput(source="*")
    config = serializers.SerializerMethodField(help_text="Everything the run was started with.")
    messages = serializers.SerializerMethodField()
    evaluation = serializers.SerializerMethodField()
    token_usage = serializers.DictField()
    cost_usd = serializers.FloatField()
    usage = serializers.SerializerMethodField(help_text="Calls, tokens (cache reads and writes per role) and cost.")
    error = BlankAsNullField()
    files = serializers.SerializerMethodField(help_text="The run's report files (names; the dashboard serves them).")

    @extend_schema_field(CoverageOutput(allow_null=True))
    def get_coverage(self, run: EvaluationRun) -> Any:
        coverage = tutoring_selectors.run_coverage(run)
        return CoverageOutput(coverage).data if coverage is not None else None

    @extend_schema_field(UsageOutput())
    def get_usage(self, run: EvaluationRun) -> Any:
        return UsageOutput(run_selectors.run_usage(run)).data

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_files(self, run: EvaluationRun) -> Any:
        return tutoring_selectors.run_files(run)

    @extend_schema_field(serializers.DictField())
    def get_config(self, run: EvaluationRun) -> Any:
        return tutoring_selectors.run_config(run)

    @extend_schema_field(MessageOutput(many=True))
    def get_messages(self, run: EvaluationRun) -> Any:
        return MessageOutput(tutoring_selectors.run_messages(run), many=True).data

    @extend_schema_field(EvaluationOutput(allow_null=True))
    def get_evaluation(self, run: EvaluationRun) -> Any:
        evaluation = tutoring_selectors.run_evaluation(run)
        return EvaluationOutput(evaluation).data if evaluation is not None else None


class RunExportOutput(RunSummaryOutput):
    """One exported run: its summary, cost, error and the judge's problems."""

    cost_usd = serializers.FloatField()
    error = BlankAsNullField()
    problems = ProblemOutput(many=True)


class RunExportListOutput(Output):
    count = serializers.IntegerField()
    dimensions = serializers.ListField(child=serializers.CharField(), help_text="The score dimensions these runs have.")
    results = RunExportOutput(many=True, source="runs")


class RunAcceptedOutput(Output):
    """A run that was queued (or changed): where to poll it."""

    run_id = serializers.CharField()
    kind = serializers.ChoiceField(RunKind.choices)
    status = serializers.ChoiceField(RunStatus.choices, help_text="The lifecycle status (the same as `run_status`).")
    run_status = serializers.ChoiceField(RunStatus.choices, source="status", help_text=RUN_STATUS)
    stage = serializers.ChoiceField(RunStage.choices, help_text=STAGE)
    attempt = serializers.IntegerField()
