"""Tutor runs: start simulated runs, evaluate a stored session, re-judge a run, a batch's comparison."""

from drf_spectacular.utils import OpenApiExample, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import limits
from evaluation.api.parsers import JSONParser
from evaluation.api.realism import RealismNoteOutput
from evaluation.api.schema import field_error, group_parameter, operation, run_id_parameter
from evaluation.api.serializers import RUN_STATUS, STAGE, ForecastOutput, Output, RunAcceptedOutput, forecast_body
from evaluation.models import EvaluationRun
from evaluation.models.runs import RunStage, RunStatus
from evaluation.runs import selectors as run_selectors
from evaluation.tutoring import selectors, services

CAPACITY = "As many runs already wait as EVAL_MAX_QUEUED_RUNS allows; try again later."


@extend_schema_serializer(
    deprecate_fields=["persona"],
    examples=[
        OpenApiExample(
            "one_persona",
            summary="Arjun (ace) on comparing decimals, no API key needed",
            value={
                "topic_id": "comparing-decimals",
                "persona_file": "ace",
                "max_turns": 6,
                "seed": 11,
                "provider": "offline",
            },
            request_only=True,
        ),
        OpenApiExample(
            "batch_with_baseline",
            summary="A batch whose comparison flags regressions",
            value={
                "topic_id": "comparing-decimals",
                "persona_file": "all",
                "runs_per_persona": 2,
                "provider": "offline",
                "baseline": "comparison_20260101_120000_1a2b3c",
            },
            request_only=True,
        ),
        OpenApiExample(
            "price_it",
            summary="The price of every persona on GPT-5.2, before anything starts (dry run)",
            value={"topic_id": "comparing-decimals", "persona_file": "all", "provider": "openai", "dry_run": True},
            request_only=True,
        ),
    ],
)
class StartInput(serializers.Serializer):
    topic_id = limits.StringField(
        max_length=100, help_text="A topic id (see the catalogue's topics), e.g. `comparing-decimals`."
    )
    persona_file = limits.StringField(
        required=False,
        help_text="The simulated student: a persona id (`ace`, or `ace.json`), or `all` for every persona "
        "(default: `average_student`).",
    )
    persona = limits.StringField(
        required=False,
        help_text="Deprecated: the same as persona_file, still accepted; persona_file wins when both are sent.",
    )
    max_turns = serializers.IntegerField(default=20, min_value=1, max_value=100)
    runs_per_persona = serializers.IntegerField(default=1, min_value=1, max_value=20)
    seed = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=services.SEED_RANGE[0],
        max_value=services.SEED_RANGE[1],
        help_text="The same seed replays the same turn decisions (default: a random one).",
    )
    target = limits.StringField(
        required=False,
        max_length=64,
        allow_blank=True,
        default="",
        help_text="The tutor under test: an agent id from the catalogue's agents (default, or `reference`: "
        "the built-in reference tutor).",
    )
    provider = limits.StringField(
        required=False,
        allow_blank=True,
        default="",
        help_text="For the simulator and the judge: 'offline', 'openai', 'anthropic/claude-sonnet-4-6', "
        "'openai/llama3@http://host:11434/v1' (default: each role's configured provider).",
    )
    cost_limit_usd = serializers.FloatField(required=False, allow_null=True, default=None, min_value=0)
    grade = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=12,
        help_text="The simulated student's grade (default: each persona's own).",
    )
    baseline = limits.StringField(
        required=False,
        max_length=200,
        allow_blank=True,
        default="",
        help_text="A comparison group (or run) id: the batch's comparison flags regressions against it.",
    )
    regression_threshold = serializers.FloatField(
        default=1.0,
        min_value=0,
        max_value=10,
        help_text="The drop that matters: the gate must be able to see it, else it is inconclusive.",
    )
    regression_rule = serializers.ChoiceField(
        [(r, r) for r in services.REGRESSION_RULES],
        default="noise-aware",
        help_text="noise-aware: one t test per dimension of the batch mean's change, Holm over the dimensions at "
        "alpha, inconclusive when a drop of the threshold had less than `power` power; fixed: any dimension whose "
        "batch mean dropped beyond the threshold.",
    )
    alpha = serializers.FloatField(
        default=0.05, help_text="The gate's false-alarm rate over all its dimensions (above 0, below 0.5)."
    )
    power = serializers.FloatField(
        default=0.8, help_text="The chance of seeing a drop of the threshold's size (0.5 or more, below 1)."
    )
    force_baseline = limits.BooleanField(
        default=False,
        help_text="Compare with a baseline that does not match (judge, judge prompt, rubric version, topic, "
        "personas, max turns) anyway; the comparison is then labelled forced everywhere it shows.",
    )
    dry_run = limits.BooleanField(
        default=False,
        help_text="Answer 200 with the calls, tokens and price (direct and by batch) these runs would take, and "
        "start nothing: no run is created, no LLM is called.",
    )


class PlanOutput(Output):
    """The planner: how many runs per persona see a drop of the threshold, what they cost and how long."""

    runs_per_persona = serializers.IntegerField(
        allow_null=True, help_text="Runs per persona that detect the threshold's drop (null: no plan, see reason)."
    )
    baseline_runs_per_persona = serializers.IntegerField(
        allow_null=True, help_text="Set when the baseline is too small: a new baseline needs this many runs too."
    )
    cost_usd = serializers.FloatField(allow_null=True, help_text="Those runs' price, high end, from the price table.")
    minutes = serializers.FloatField(allow_null=True, help_text="How long they take at the configured concurrency.")
    detects = serializers.DictField(child=serializers.FloatField(), help_text="Per dimension: the drop detected.")
    detects_at_one_run = serializers.DictField(
        child=serializers.FloatField(), help_text="Per dimension: the drop one run per persona detects."
    )
    spread = serializers.DictField(child=serializers.FloatField(), help_text="Per dimension: the run-to-run spread.")
    threshold = serializers.FloatField()
    alpha = serializers.FloatField()
    power = serializers.FloatField()
    spread_from = serializers.CharField(allow_null=True, help_text="The group whose repeats gave the spread.")
    text = serializers.CharField()


class StartForecastOutput(ForecastOutput):
    plan = PlanOutput(help_text="The runs per persona a trustworthy verdict needs (the gate's planner).")


class StartOutput(Output):
    run_id = serializers.SerializerMethodField(help_text="The first run's id.")
    run_ids = serializers.SerializerMethodField(help_text="Every run started: one per persona and repeat.")
    group = serializers.SerializerMethodField(
        help_text="The comparison id when more than one run started or a baseline was given: "
        "`/api/evaluation/comparisons/{group}` shows its gate."
    )
    status = serializers.SerializerMethodField(help_text="The first run's lifecycle status (the same as `run_status`).")
    run_status = serializers.SerializerMethodField(help_text=RUN_STATUS)
    stage = serializers.SerializerMethodField(help_text=STAGE)

    def get_run_id(self, runs: list[EvaluationRun]) -> str:
        return runs[0].run_id

    def get_run_ids(self, runs: list[EvaluationRun]) -> list[str]:
        return [r.run_id for r in runs]

    def get_group(self, runs: list[EvaluationRun]) -> str | None:
        return runs[0].group or None

    @extend_schema_field(serializers.ChoiceField(RunStatus.choices))
    def get_status(self, runs: list[EvaluationRun]) -> str:
        return runs[0].status

    @extend_schema_field(serializers.ChoiceField(RunStatus.choices))
    def get_run_status(self, runs: list[EvaluationRun]) -> str:
        return runs[0].status

    @extend_schema_field(serializers.ChoiceField(RunStage.choices))
    def get_stage(self, runs: list[EvaluationRun]) -> str:
        return runs[0].stage


class StartView(APIView):
    required_permission = "evaluation.start_run"
    parser_classes = [JSONParser]

    @operation(
        operation_id="evaluation_start",
        tag="tutoring",
        summary="Start simulated runs",
        description="Simulated students (one persona, or `all`, each repeated `runs_per_persona` times) talk to "
        "the tutor in the background; each run is then judged. Poll `/api/evaluation/runs/{run_id}/status`. "
        "With `dry_run: true` the answer is 200 with the price before the run (calls, tokens, USD direct and by "
        "batch, from the prompts' sizes and today's price table) and nothing starts.",
        request=StartInput,
        ok={202: StartOutput, 200: StartForecastOutput},
        invalid="A field is not valid, e.g. max_turns out of range, an unknown provider, a persona path, "
        "a provider whose API key (OPENAI_API_KEY, ANTHROPIC_API_KEY) is not set, or a baseline that does "
        "not compare: another judge, judge prompt, rubric version, topic, max turns, or personas it lacks "
        "(unless force_baseline).",
        not_found="topic_id, persona_file, target or baseline names nothing.",
        conflict=CAPACITY,
        body=True,
        invalid_example=field_error("max_turns", "Ensure this value is less than or equal to 100."),
        not_found_example="topic_id: no topic 'nope'; the topics are: adding-fractions-like-denominators, area-and-perimeter, comparing-decimals, two-digit-addition-regrouping",
    )
    def post(self, request: Request) -> Response:
        body = StartInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data["dry_run"]:
            found = services.run_forecast(
                topic_id=data["topic_id"],
                persona=data.get("persona_file") or data.get("persona") or "average_student.json",
                max_turns=data["max_turns"],
                runs_per_persona=data["runs_per_persona"],
                agent_id=None if run_selectors.target_is_reference_tutor(data["target"]) else data["target"] or None,
                provider=data["provider"] or None,
                grade=data["grade"],
            )
            plan = services.run_plan(
                topic_id=data["topic_id"],
                persona=data.get("persona_file") or data.get("persona") or "average_student.json",
                max_turns=data["max_turns"],
                agent_id=None if run_selectors.target_is_reference_tutor(data["target"]) else data["target"] or None,
                provider=data["provider"] or None,
                grade=data["grade"],
                baseline=data["baseline"] or None,
                threshold=data["regression_threshold"],
                alpha=data["alpha"],
                power=data["power"],
            )
            return Response({**forecast_body(found), "plan": PlanOutput(plan).data}, status=status.HTTP_200_OK)
        runs = services.run_start(
            user=request.user,
            topic_id=data["topic_id"],
            persona=data.get("persona_file") or data.get("persona") or "average_student.json",
            max_turns=data["max_turns"],
            runs_per_persona=data["runs_per_persona"],
            seed=data["seed"],
            agent_id=None if run_selectors.target_is_reference_tutor(data["target"]) else data["target"] or None,
            provider=data["provider"] or None,
            cost_limit_usd=data["cost_limit_usd"],
            grade=data["grade"],
            baseline=data["baseline"] or None,
            regression_threshold=data["regression_threshold"],
            regression_rule=data["regression_rule"],
            force_baseline=data["force_baseline"],
            alpha=data["alpha"],
            power=data["power"],
        )
        return Response(StartOutput(runs).data, status=status.HTTP_202_ACCEPTED)


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "session",
            summary="A stored session, judged offline",
            value={"session_id": "0b6f1c9e-8d2a-4f4e-9a51-3c2d7e1f0a42", "provider": "offline"},
            request_only=True,
        )
    ]
)
class EvaluateSessionInput(serializers.Serializer):
    session_id = serializers.UUIDField(help_text="A stored tutoring session of the reference tutor.")
    provider = limits.StringField(
        required=False, allow_blank=True, default="", help_text="The judge's provider (default: as configured)."
    )


class EvaluateSessionView(APIView):
    required_permission = "evaluation.start_run"
    parser_classes = [JSONParser]

    @operation(
        operation_id="evaluation_evaluate_session",
        tag="tutoring",
        summary="Evaluate a stored session",
        description="Copies a stored tutoring session's messages into a new run ('teacher' becomes 'tutor') "
        "and judges it in the background.",
        request=EvaluateSessionInput,
        ok={202: RunAcceptedOutput},
        invalid="session_id is not a UUID or the session has no messages; or the provider is unknown or "
        "lacks its API key.",
        not_found="No session has this id.",
        conflict=CAPACITY,
        body=True,
    )
    def post(self, request: Request) -> Response:
        body = EvaluateSessionInput(data=request.data)
        body.is_valid(raise_exception=True)
        run = services.session_evaluation_start(
            user=request.user,
            session_id=str(body.validated_data["session_id"]),
            provider=body.validated_data["provider"] or None,
        )
        return Response(RunAcceptedOutput(run).data, status=status.HTTP_202_ACCEPTED)


class RetryEvaluationView(APIView):
    required_permission = "evaluation.retry_run"

    @operation(
        operation_id="evaluation_retry_evaluation",
        tag="tutoring",
        summary="Re-judge a tutor run",
        description="Queues a new attempt that judges the run's stored conversation again, without "
        "simulating it again (e.g. after the judge failed).",
        parameters=[run_id_parameter("A tutor run's readable id or UUID.")],
        ok={202: RunAcceptedOutput},
        not_found="No tutor run has this id.",
        conflict_example="run run_20260101_120000_ace has no stored conversation to evaluate",
        conflict="The run has no stored conversation to evaluate, is still queued or running, or "
        + CAPACITY[0].lower()
        + CAPACITY[1:],
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = services.run_retry_evaluation_start(run=run_selectors.run_lookup(run_id, kind="tutor"), user=request.user)
        return Response(RunAcceptedOutput(run).data, status=status.HTTP_202_ACCEPTED)


class VerdictOutput(Output):
    persona_id = serializers.CharField()
    dimension = serializers.CharField(help_text="A dimension, or `average`.")
    baseline = serializers.FloatField(help_text="The baseline's mean.")
    mean = serializers.FloatField()
    n = serializers.IntegerField(help_text="Runs behind the mean.")
    low = serializers.FloatField(allow_null=True, help_text="The mean's 95% t interval (null for one run).")
    high = serializers.FloatField(allow_null=True)
    drop = serializers.FloatField()
    flagged = serializers.BooleanField(
        help_text="This persona's drop is beyond the threshold (and its interval): a diagnostic, not the verdict."
    )
    why = serializers.CharField()


class DimensionTestOutput(Output):
    """One dimension's batch-mean change, tested as one of the gate's family."""

    dimension = serializers.CharField()
    delta = serializers.FloatField(help_text="Candidate minus baseline, averaged over personas (negative: a drop).")
    se = serializers.FloatField(allow_null=True)
    df = serializers.FloatField(
        help_text="Degrees of freedom: personas - 1 paired; Welch-Satterthwaite's unpaired (not a whole number)."
    )
    personas = serializers.IntegerField()
    paired = serializers.BooleanField(help_text="Compared run by run where persona, topic and seed match.")
    pairs = serializers.IntegerField()
    variance = serializers.FloatField(allow_null=True)
    floored = serializers.BooleanField(help_text="The measured spread was below the floor; the floor was used.")
    p_value = serializers.FloatField(allow_null=True, help_text="One-sided, before Holm.")
    mdd = serializers.FloatField(allow_null=True, help_text="The minimum detectable drop at alpha/D and the power.")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    significant = serializers.BooleanField(help_text="Rejected by Holm's procedure over the dimensions.")
    regression = serializers.BooleanField(help_text="This dimension makes the gate a regression.")
    borrowed = serializers.IntegerField(
        help_text="Unpaired: personas with one run in each batch, given the spread pooled over the others."
    )
    labelled = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="People-labelled runs of the baseline and of the batch that corrected the change ([0, 0]: none).",
    )
    lam = serializers.FloatField(
        allow_null=True,
        help_text="The correction's power tuning (1: plain prediction-powered, 0: people's change alone); null: "
        "not corrected.",
    )


class BaselineGateOutput(Output):
    """A batch checked against its baseline."""

    baseline = serializers.CharField()
    outcome = serializers.ChoiceField(
        ["regression", "pass", "inconclusive", "not compared"],
        help_text="Only `pass` is a pass. `inconclusive`: no significant drop, but the batch could not have seen a "
        "drop of the threshold (reason says what it could see and how many runs would); `not compared` says why.",
    )
    reason = serializers.CharField()
    rule = serializers.CharField()
    family_rule = serializers.CharField(help_text="The rule in words: tests, pairing, multiplicity control.")
    threshold = serializers.FloatField()
    alpha = serializers.FloatField()
    power = serializers.FloatField()
    pairing = serializers.CharField()
    tests = DimensionTestOutput(many=True, help_text="Per dimension: the tests that decide the outcome.")
    plan = serializers.DictField(allow_null=True, help_text="The planner's figures from the baseline's spread.")
    forced = serializers.BooleanField(help_text="Compared although the baseline does not match (see mismatches).")
    mismatches = serializers.ListField(child=serializers.CharField())
    verdicts = VerdictOutput(many=True)
    left_out = serializers.ListField(child=serializers.CharField(), help_text="Runs not compared, with why.")
    no_baseline = serializers.ListField(child=serializers.CharField(), help_text="Personas the baseline lacks.")
    min_coverage = serializers.FloatField()


class ComparisonRunOutput(Output):
    run_id = serializers.CharField()
    persona_id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(RunStatus.choices)
    avg_score = serializers.FloatField(allow_null=True)
    turns_answered = serializers.IntegerField(allow_null=True)
    max_turns = serializers.IntegerField()
    coverage = serializers.FloatField()


class ComparisonOutput(Output):
    group = serializers.CharField()
    final = serializers.BooleanField(help_text="False while runs of the group are still queued or running.")
    runs = ComparisonRunOutput(many=True)
    gate = BaselineGateOutput(allow_null=True, help_text="The check against the baseline the batch was started with.")
    realism = RealismNoteOutput(
        many=True,
        help_text="Beside the verdict, never changing it: the batch's personas whose simulated students are unlike "
        "real ones (per simulator model; the realism card's notes). Empty when none is, or none was judged.",
    )


class ComparisonView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    @operation(
        operation_id="evaluation_comparison",
        tag="tutoring",
        summary="A batch's comparison and its gate",
        description="The runs of a comparison group and, when it was started with a baseline, its gate: "
        "`pass`, `regression`, or `not compared` with the reason (nothing in common, every run failed or "
        "was cut short). Final once no run of the group is queued or running.",
        parameters=[group_parameter()],
        ok={200: ComparisonOutput},
        not_found="No comparison group has this id.",
    )
    def get(self, request: Request, group: str) -> Response:
        summary = selectors.comparison_summary(group)
        return Response(ComparisonOutput({**summary, "realism": selectors.group_realism_of(group)}).data)
