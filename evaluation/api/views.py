"""Evaluation API (spec 001's six endpoints plus a per-run status). Thin: validate, call, serialize."""

from django.db.models import Q
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from evaluation.api.serializers import EvaluateSessionSerializer, StartSerializer, SuiteRunSerializer
from evaluation.models import EvaluationRun
from evaluation.runs import selectors as runs_selectors
from evaluation.runs import services as run_services
from evaluation.suites import selectors as suite_selectors
from evaluation.suites import services as suite_services
from evaluation.tutoring import selectors, services


@api_view(["POST"])
def start(request: Request) -> Response:
    """Start simulated runs in the background: one persona, or 'all', optionally repeated."""
    body = StartSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    runs = services.run_start(
        topic_id=data["topic_id"],
        persona=data.get("persona_file") or data.get("persona") or "average_student.json",
        max_turns=data["max_turns"],
        runs_per_persona=data["runs_per_persona"],
        seed=data["seed"],
        agent_id=data["target"] or None,
        provider=data["provider"] or None,
        cost_limit_usd=data["cost_limit_usd"],
    )
    return Response(
        {
            "run_id": runs[0].run_id,
            "run_ids": [r.run_id for r in runs],
            "group": runs[0].group or None,
            "status": runs[0].status,
        },
        status=status.HTTP_202_ACCEPTED,
    )


@api_view(["GET"])
def current_status(request: Request) -> Response:
    """The newest active run's status (spec 001's polling shape), or idle; ?run_id= for one run."""
    if request.query_params.get("run_id"):
        return Response(runs_selectors.run_status(runs_selectors.run_lookup(request.query_params["run_id"])))
    active = runs_selectors.active_runs().order_by("-created_at")
    run = active.first() or EvaluationRun.objects.order_by("-created_at").first()
    if run is None:
        return Response(
            {"status": "idle", "run_id": None, "detail": "", "turn": 0, "max_turns": 0, "error": None, "active_runs": 0}
        )
    return Response({**runs_selectors.run_status(run), "active_runs": active.count()})


@api_view(["GET"])
def run_list(request: Request) -> Response:
    """All runs, newest first; filter with ?source=&persona=&topic=&status=&group=, page with ?limit=&offset=."""
    runs = runs_selectors.runs_with_results().order_by("-created_at")
    params = request.query_params
    filters = Q()
    if params.get("source"):
        filters &= Q(source=params["source"])
    if params.get("persona"):
        filters &= Q(persona__persona_id=params["persona"])
    if params.get("topic"):
        filters &= Q(topic__topic_id=params["topic"])
    if params.get("status"):
        filters &= Q(status=params["status"])
    if params.get("group"):
        filters &= Q(group=params["group"])
    try:
        limit = max(1, min(500, int(params.get("limit", 100))))
        offset = max(0, int(params.get("offset", 0)))
    except ValueError:
        return Response(
            {"error": "limit, offset: must be integers", "fields": {"limit": ["must be an integer"]}}, status=400
        )
    runs = runs.filter(filters)
    page = [runs_selectors.run_summary(r) for r in runs[offset : offset + limit]]
    return Response({"count": runs.count(), "results": page})


@api_view(["GET"])
def run_detail(request: Request, run_id: str) -> Response:
    run = runs_selectors.run_lookup(run_id)
    ctx = selectors.run_report_context(run)
    return Response(
        {
            **runs_selectors.run_summary(run),
            **{"status_detail": runs_selectors.run_status(run)},
            "config": ctx["config"],
            "messages": ctx["messages"],
            "evaluation": ctx["evaluation"],
            "token_usage": run.token_usage,
            "cost_usd": run.cost_usd,
            "error": run.error or None,
            "artifacts_dir": run.artifacts_dir or None,
        }
    )


@api_view(["GET"])
def run_status(request: Request, run_id: str) -> Response:
    return Response(runs_selectors.run_status(runs_selectors.run_lookup(run_id)))


@api_view(["POST"])
def evaluate_session(request: Request) -> Response:
    body = EvaluateSessionSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    run = services.session_evaluation_start(
        session_id=str(body.validated_data["session_id"]), provider=body.validated_data["provider"] or None
    )
    return Response({"run_id": run.run_id, "status": run.status}, status=status.HTTP_202_ACCEPTED)


@api_view(["POST"])
def retry_evaluation(request: Request, run_id: str) -> Response:
    run = services.run_retry_evaluation_start(run=runs_selectors.run_lookup(run_id, kind="tutor"))
    return Response({"run_id": run.run_id, "status": run.status}, status=status.HTTP_202_ACCEPTED)


@api_view(["POST"])
def run_retry(request: Request, run_id: str) -> Response:
    """Queue a new attempt of a failed or interrupted run (any kind)."""
    run = run_services.run_requeue(runs_selectors.run_lookup(run_id))
    return Response(
        {"run_id": run.run_id, "status": run.status, "attempt": run.attempt}, status=status.HTTP_202_ACCEPTED
    )


@api_view(["POST"])
def run_cancel(request: Request, run_id: str) -> Response:
    """Cancel a queued or running run; its worker stops at its next unit of progress."""
    run = run_services.run_cancel(runs_selectors.run_lookup(run_id))
    return Response({"run_id": run.run_id, "status": run.status})


@api_view(["GET"])
def suite_list(request: Request) -> Response:
    return Response({"results": suite_selectors.suite_list()})


@api_view(["POST"])
def suite_run(request: Request, suite_id: int) -> Response:
    body = SuiteRunSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    run = suite_services.suite_run_start(suite_id=suite_id, **body.validated_data)
    return Response({"run_id": run.run_id, "status": run.status}, status=status.HTTP_202_ACCEPTED)


@api_view(["GET"])
def suite_run_detail(request: Request, run_id: str) -> Response:
    run = runs_selectors.run_lookup(run_id, kind="suite")
    return Response(
        {
            **runs_selectors.run_status(run),
            "passed_share": run.overall_score,
            "results": suite_selectors.suite_results(run),
        }
    )
