"""EVAL.md suites (spec 003): the discovered suites, runs of one, and a suite run's case results."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.api.pagination import Pagination, paginated
from evaluation.api.schema import operation, path_parameter, run_id_parameter
from evaluation.api.serializers import Output, RunAcceptedOutput, RunStatusOutput
from evaluation.models import EvaluationRun
from evaluation.runs import selectors as run_selectors
from evaluation.suites import selectors, services

SUITE_ID = path_parameter("suite_id", "A discovered suite's id (see the suite list).", int)
UNKNOWN_SUITE = "No suite has this id."


class SuiteFilterInput(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, help_text="Only suites of this name.")


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


class SuiteRunInput(serializers.Serializer):
    model = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="The agent's provider (default: as configured)."
    )
    judge_model = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="The judge's provider (default: as configured)."
    )
    judge = serializers.BooleanField(required=False, default=True, help_text="False: run the checks only.")


class SuiteRunStartView(APIView):
    required_permission = "evaluation.start_run"

    @operation(
        operation_id="suites_run",
        tag="suites",
        summary="Run a suite",
        description="Runs every case of the suite (as its file reads now) in the background.",
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
    passed = serializers.BooleanField()
    cached = serializers.BooleanField(help_text="True when a recorded pass with the same fingerprint was reused.")
    checks = serializers.ListField(child=serializers.DictField(), help_text="{name, passed, detail} per check.")
    warnings = serializers.ListField(child=serializers.CharField())
    transcript = serializers.DictField()
    duration_ms = serializers.FloatField()
    usage = serializers.DictField()


class SuiteRunDetailOutput(RunStatusOutput):
    passed_share = serializers.FloatField(source="overall_score", allow_null=True, help_text="0-1, once it ends.")
    results = serializers.SerializerMethodField()

    @extend_schema_field(CaseResultOutput(many=True))
    def get_results(self, run: EvaluationRun) -> Any:
        return CaseResultOutput(selectors.suite_results(run), many=True).data


class SuiteRunDetailView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    @operation(
        operation_id="suites_runs_retrieve",
        tag="suites",
        summary="One suite run",
        description="A suite run's status and each case's result: PASS or FAIL, checks, warnings, transcript.",
        parameters=[run_id_parameter("A suite run's readable id or UUID.")],
        ok={200: SuiteRunDetailOutput},
        not_found="No suite run has this id.",
    )
    def get(self, request: Request, run_id: str) -> Response:
        return Response(SuiteRunDetailOutput(run_selectors.run_lookup(run_id, kind="suite")).data)
