"""Runs of every kind: list, export, detail, status, cancel and retry. Thin: validate, call, serialize."""

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.api.export import export_max_rows, runs_csv_stream
from evaluation.api.pagination import Pagination, paginated_rows
from evaluation.api.schema import operation, run_id_parameter
from evaluation.api.serializers import (
    CurrentStatusInput,
    CurrentStatusOutput,
    Output,
    RunAcceptedOutput,
    RunDetailOutput,
    RunExportInput,
    RunExportListOutput,
    RunFilterInput,
    RunStatusOutput,
    RunSummaryOutput,
)
from evaluation.models import EvaluationRun, RunEvent
from evaluation.redact import redact
from evaluation.runs import selectors, services

UNKNOWN_RUN = "No run has this id."


class RunEventOutput(Output):
    """One change of a run's state: when, in which attempt, to which status, by whom, and why."""

    at = serializers.DateTimeField()
    attempt = serializers.IntegerField()
    status = serializers.CharField(help_text="The status the run entered (queued, running, cancelled, ...).")
    actor = serializers.SerializerMethodField(help_text="user:<name>, worker:<host:pid>, sweeper or cli.")
    note = serializers.SerializerMethodField(help_text="Why, when one was given; URL credentials masked.")

    def get_actor(self, event: RunEvent) -> str:
        return str(redact(event.actor))

    def get_note(self, event: RunEvent) -> str:
        return str(redact(event.note))


@extend_schema_serializer(component_name="RunDetailOutput")
class RunDetailWithHistoryOutput(RunDetailOutput):
    """One run: its summary, status, configuration, conversation, judgement and usage, who started it and
    every change of its state."""

    started_by = serializers.SerializerMethodField(
        help_text="The user who started the run (the API token's or the dashboard's); null for the CLI."
    )
    events = serializers.SerializerMethodField(
        help_text="Every change of the run's state, oldest first: started, running, cancelled, retried, ended."
    )

    def get_started_by(self, run: EvaluationRun) -> str | None:
        user = run.started_by
        return user.get_username() if user is not None else None

    @extend_schema_field(RunEventOutput(many=True))
    def get_events(self, run: EvaluationRun) -> Any:
        return RunEventOutput(run.events.order_by("at", "id"), many=True).data


class RunListView(APIView):
    required_permission = "evaluation.view_evaluationrun"
    pagination_class = Pagination

    @operation(
        operation_id="runs_list",
        tag="runs",
        summary="List runs",
        description="Runs of every kind, newest first, one page at a time; filter by kind, source, persona, "
        "topic, agent, status, group and creation date.",
        parameters=[RunFilterInput],
        ok={200: RunSummaryOutput(many=True)},
        invalid="A filter or page parameter is not valid (e.g. `limit=abc`, `date_to=2026-13-45`).",
    )
    def get(self, request: Request) -> Response:
        filters = RunFilterInput(data=request.query_params)
        filters.is_valid(raise_exception=True)
        services.runs_interrupt_stale_on_read()
        rows = selectors.run_summary_rows(**filters.validated_data)
        return paginated_rows(
            self, request, rows, lambda page: RunSummaryOutput.summaries_data(selectors.run_summaries(page))
        )


class RunExportView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # ?format= is this operation's own parameter (csv or json, checked by RunExportInput),
        # not DRF's renderer switch; answers other than the CSV stream, errors included, are JSON.
        renderer = JSONRenderer()
        return renderer, renderer.media_type

    @operation(
        operation_id="runs_export",
        tag="runs",
        summary="Export runs with their scores and problems",
        description="The runs the list filters select, every one of them, as CSV (streamed: one row per run, "
        "a `score:<dimension>` column per dimension, problems joined in one column) or JSON. "
        "`limit` keeps the newest that many. An export holds at most `EXPORT_MAX_ROWS` runs "
        "(settings.EVALUATION, 10000 by default); beyond that it is refused with 400: narrow the filters "
        "or set `limit`.",
        parameters=[RunExportInput],
        ok={(200, "text/csv"): OpenApiTypes.STR, (200, "application/json"): RunExportListOutput},
        invalid="A filter is not valid, `format` is not csv or json, `limit` is not a whole number from 1 to "
        "`EXPORT_MAX_ROWS`, or more runs match than an export may hold.",
    )
    def get(self, request: Request) -> Any:
        query = RunExportInput(data=request.query_params, context={"max_rows": export_max_rows()})
        query.is_valid(raise_exception=True)
        filters = dict(query.validated_data)
        export_format = filters.pop("format")
        export = selectors.run_export(max_rows=export_max_rows(), **filters)
        if export_format == "csv":
            response = StreamingHttpResponse(runs_csv_stream(export), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = 'attachment; filename="runs.csv"'
            return response
        return Response(RunExportListOutput(export).data)


class RunDetailView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    @operation(
        operation_id="runs_retrieve",
        tag="runs",
        summary="One run",
        description="A run of any kind: its summary and status, configuration, conversation (the newest "
        "attempt's messages), the judge's scores, analysis and problems, token usage and cost, who started "
        "it and its event log (who started, cancelled or retried it, when, with the note).",
        parameters=[run_id_parameter()],
        ok={200: RunDetailWithHistoryOutput},
        not_found=UNKNOWN_RUN,
    )
    def get(self, request: Request, run_id: str) -> Response:
        services.runs_interrupt_stale_on_read()
        return Response(RunDetailWithHistoryOutput(selectors.run_lookup(run_id)).data)


class RunStatusView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    @operation(
        operation_id="runs_status_retrieve",
        tag="runs",
        summary="One run's status",
        description="One run's progress, for polling: `stage` is where it is, `run_status` its lifecycle "
        "status (queued, running, completed, failed, interrupted, cancelled), the same two fields a run's "
        "detail answers. `status` repeats the stage for the first polling clients; in a run's detail and "
        "the run list, `status` is the lifecycle status. Poll until `run_status` is no longer queued or running.",
        parameters=[run_id_parameter()],
        ok={200: RunStatusOutput},
        not_found=UNKNOWN_RUN,
    )
    def get(self, request: Request, run_id: str) -> Response:
        services.runs_interrupt_stale_on_read()
        return Response(RunStatusOutput(selectors.run_lookup(run_id)).data)


class CurrentStatusView(APIView):
    required_permission = "evaluation.view_evaluationrun"

    @operation(
        operation_id="evaluation_status_retrieve",
        tag="runs",
        summary="Current status (polling)",
        description="Polling without a run id: the newest active run's status, else the newest run's, "
        "else `idle`; `?run_id=` asks for one run, `?kind=tutor` (or drift, suite) keeps to one kind of run. "
        "`active_runs` counts the runs queued or running (of that kind). `stage`, `run_status` and `status` "
        "mean what they mean in one run's status.",
        parameters=[CurrentStatusInput],
        ok={200: CurrentStatusOutput},
        invalid="A query parameter is not valid.",
        not_found="`run_id` names no run.",
    )
    def get(self, request: Request) -> Response:
        query = CurrentStatusInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        services.runs_interrupt_stale_on_read()
        current = selectors.run_current(run_id=data.get("run_id"), kind=data.get("kind") or "")
        return Response(CurrentStatusOutput(current).data)


class RunCancelView(APIView):
    required_permission = "evaluation.cancel_run"

    @operation(
        operation_id="runs_cancel",
        tag="runs",
        summary="Cancel a run",
        description="Ends a queued or running run of any kind as cancelled; its worker stops at its next "
        "unit of progress (a turn, a case, a batch of checks).",
        parameters=[run_id_parameter()],
        ok={200: RunAcceptedOutput},
        not_found=UNKNOWN_RUN,
        conflict="The run has already ended (completed, failed, interrupted or cancelled).",
        conflict_example="run run_20260101_120000_ace is completed; only queued or running runs can be cancelled",
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = services.run_cancel(selectors.run_lookup(run_id), user=request.user)
        return Response(RunAcceptedOutput(run).data)


class RunRetryView(APIView):
    required_permission = "evaluation.retry_run"

    @operation(
        operation_id="runs_retry",
        tag="runs",
        summary="Retry a run",
        description="Queues a new attempt of a failed, interrupted or completed run of any kind (the old "
        "attempt's messages stay with it). A tutor run is simulated again; to re-judge its stored "
        "conversation instead, use retry-evaluation.",
        parameters=[run_id_parameter()],
        ok={202: RunAcceptedOutput},
        not_found=UNKNOWN_RUN,
        conflict="The run is still queued or running, or as many runs already wait as EVAL_MAX_QUEUED_RUNS allows.",
        conflict_example="run run_20260101_120000_ace is running; only failed, interrupted or completed runs can be "
        "retried",
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = services.run_requeue(selectors.run_lookup(run_id), user=request.user)
        return Response(RunAcceptedOutput(run).data, status=status.HTTP_202_ACCEPTED)
