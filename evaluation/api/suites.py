"""EVAL.md suites: the discovered suites, runs of one, and a suite run's case results."""

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import limits
from evaluation.api.pagination import Pagination, paginated
from evaluation.api.parsers import JSONParser
from evaluation.api.schema import body_example, operation, path_parameter, run_id_parameter
from evaluation.api.serializers import Output, QueryInput, RunAcceptedOutput, RunStatusOutput
from evaluation.models import EvaluationRun
from evaluation.runs import selectors as run_selectors
from evaluation.suites import selectors, services

SUITE_ID = path_parameter("suite_id", "A discovered suite's id (see the suite list).", int)
UNKNOWN_SUITE = "No suite has this id."


class SuiteFilterInput(QueryInput):
    name = serializers.CharField(required=False, help_text="Only suites of this name.")


class SuiteOutput(Output):
    id = serializers.IntegerField()
    name = serializers.CharField()
    path = serializers.CharField(help_text="The EVAL.md file, relative to the project.")
    cases = serializers.IntegerField(source="case_count", help_text="How many cases it has.")


class CaseOutput(Output):
    name = serializers.CharField()
    line = serializers.IntegerField(help_text="Where the case starts in the file.")
    prompt = serializers.CharField()
    expect = serializers.CharField(help_text="The rubric the judge applies.")


class SuiteDetailOutput(SuiteOutput):
    frontmatter = serializers.DictField(help_text="skills, tools, model, agent, ... as the file declares them.")
    discovered_at = serializers.DateTimeField()
    case_list = CaseOutput(many=True, source="cases.all")


class SuiteListView(APIView):
    required_permission = "evaluation.view_suite"
    pagination_class = Pagination

    @operation(
        operation_id="suites_list",
        tag="suites",
        summary="List suites",
        description="The EVAL.md suites discovered into the database (manage.py discover_suites), by path.",
        parameters=[SuiteFilterInput],
        ok={200: SuiteOutput(many=True)},
        invalid="A page parameter is not valid (e.g. `limit=abc`).",
    )
    def get(self, request: Request) -> Response:
        filters = SuiteFilterInput(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return paginated(self, request, selectors.suites_with_case_counts(**filters.validated_data), SuiteOutput)


class SuiteDetailView(APIView):
    required_permission = "evaluation.view_suite"

    @operation(
        operation_id="suites_retrieve",
        tag="suites",
        summary="One suite",
        description="A suite with its frontmatter and cases (prompt and rubric), in file order.",
        parameters=[SUITE_ID],
        ok={200: SuiteDetailOutput},
        not_found=UNKNOWN_SUITE,
    )
    def get(self, request: Request, suite_id: int) -> Response:
        return Response(SuiteDetailOutput(selectors.suite_get(suite_id)).data)


@extend_schema_serializer(
    examples=[
        body_example(
            "offline", "Each case once, agent and judge offline", {"model": "offline", "judge_model": "offline"}
        ),
        body_example(
            "pass_k", "Each case three times, checks only", {"model": "offline", "judge": False, "repeats": 3}
        ),
    ]
)
class SuiteRunInput(serializers.Serializer):
    model = limits.StringField(
        required=False, allow_blank=True, default="", help_text="The agent's provider (default: as configured)."
    )
    judge_model = limits.StringField(
        required=False, allow_blank=True, default="", help_text="The judge's provider (default: as configured)."
    )
    judge = limits.BooleanField(required=False, default=True, help_text="False: run the checks only.")
    repeats = serializers.IntegerField(
        required=False,
        default=1,
        min_value=1,
        max_value=services.MAX_REPEATS,
        help_text="Times each case runs; a case passes only when all of them do (pass^k).",
    )


class SuiteRunStartView(APIView):
    required_permission = "evaluation.start_run"
    parser_classes = [JSONParser]

    @operation(
        operation_id="suites_run",
        tag="suites",
        summary="Run a suite",
        description="Runs every case of the suite (as its file reads now) in the background, `repeats` times each.",
        parameters=[SUITE_ID],
        request=SuiteRunInput,
        ok={202: RunAcceptedOutput},
        invalid="model or judge_model is unknown or lacks its API key.",
        not_found=UNKNOWN_SUITE,
        conflict="As many runs already wait as EVAL_MAX_QUEUED_RUNS allows; try again later.",
        body=True,
    )
    def post(self, request: Request, suite_id: int) -> Response:
        body = SuiteRunInput(data=request.data)
        body.is_valid(raise_exception=True)
        run = services.suite_run_start(suite_id=suite_id, user=request.user, **body.validated_data)
        return Response(RunAcceptedOutput(run).data, status=status.HTTP_202_ACCEPTED)


class CaseResultOutput(Output):
    case = serializers.CharField()
    repeat = serializers.IntegerField(help_text="Which repeat of the case (1 to repeats).")
    passed = serializers.BooleanField()
    cached = serializers.BooleanField(help_text="True when a recorded pass with the same fingerprint was reused.")
    checks = serializers.ListField(child=serializers.DictField(), help_text="{name, passed, detail} per check.")
    warnings = serializers.ListField(child=serializers.CharField())
    transcript = serializers.DictField()
    duration_ms = serializers.FloatField()
    usage = serializers.DictField()
    agent_model = serializers.CharField(help_text="The agent's provider/model as it ran.")
    judge_model = serializers.CharField(help_text="The judge's provider/model as it ran; empty when off.")
    judged_by = serializers.CharField(help_text="Which judge gave the verdict, in words (the offline judge says so).")


class CaseSummaryOutput(Output):
    case = serializers.CharField()
    k = serializers.IntegerField(help_text="Repeats run.")
    passes = serializers.IntegerField()
    pass_k = serializers.BooleanField(help_text="pass^k: every repeat passed.")
    mean = serializers.FloatField(help_text="The pass rate over the repeats.")
    ci_low = serializers.FloatField(help_text="95% Wilson interval of the pass rate.")
    ci_high = serializers.FloatField()


class SuiteRunDetailOutput(RunStatusOutput):
    passed_share = serializers.FloatField(
        source="overall_score", allow_null=True, help_text="0-1 share of cases that passed (all repeats), once it ends."
    )
    repeats = serializers.IntegerField(source="suite_run.repeats", help_text="Times each case runs.")
    judged_by = serializers.SerializerMethodField(help_text="Which judge ran, once a case was judged.")
    cases = serializers.SerializerMethodField()
    results = serializers.SerializerMethodField()

    def _results(self, run: EvaluationRun) -> list[dict[str, Any]]:
        # Read once per run for the three fields that use them.
        cached: dict[Any, list[dict[str, Any]]] = self.__dict__.setdefault("_suite_results", {})
        if run.pk not in cached:
            cached[run.pk] = selectors.suite_results(run)
        return cached[run.pk]

    def get_judged_by(self, run: EvaluationRun) -> str:
        return next((r["judged_by"] for r in self._results(run) if r["judged_by"]), "")

    @extend_schema_field(CaseSummaryOutput(many=True))
    def get_cases(self, run: EvaluationRun) -> Any:
        return CaseSummaryOutput(selectors.suite_case_summaries(self._results(run)), many=True).data

    @extend_schema_field(CaseResultOutput(many=True))
    def get_results(self, run: EvaluationRun) -> Any:
        return CaseResultOutput(self._results(run), many=True).data


class SuiteRunDetailView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    @operation(
        operation_id="suites_runs_retrieve",
        tag="suites",
        summary="One suite run",
        description=(
            "A suite run's status, the judge that ran, each case's pass^k with its pass rate and 95% interval, "
            "and each result: PASS or FAIL, checks, warnings, transcript."
        ),
        parameters=[run_id_parameter("A suite run's readable id or UUID.")],
        ok={200: SuiteRunDetailOutput},
        not_found="No suite run has this id.",
    )
    def get(self, request: Request, run_id: str) -> Response:
        return Response(SuiteRunDetailOutput(run_selectors.run_lookup(run_id, kind="suite")).data)
