"""REST API routes."""

from django.urls import path

from evaluation.api import drift, views

urlpatterns = [
    path("evaluation/start", views.start, name="api-evaluation-start"),
    path("evaluation/status", views.current_status, name="api-evaluation-status"),
    path("evaluation/runs", views.run_list, name="api-evaluation-runs"),
    path("evaluation/runs/<str:run_id>", views.run_detail, name="api-evaluation-run"),
    path("evaluation/runs/<str:run_id>/status", views.run_status, name="api-evaluation-run-status"),
    path("evaluation/runs/<str:run_id>/retry-evaluation", views.retry_evaluation, name="api-evaluation-retry"),
    path("evaluation/runs/<str:run_id>/retry", views.run_retry, name="api-run-retry"),
    path("evaluation/runs/<str:run_id>/cancel", views.run_cancel, name="api-run-cancel"),
    path("evaluation/evaluate-session", views.evaluate_session, name="api-evaluation-session"),
    path("drift/messages", drift.ingest, name="api-drift-ingest"),
    path("drift/agents/<str:agent_id>/evaluate", drift.evaluate, name="api-drift-evaluate"),
    path("drift/agents/<str:agent_id>/gate", drift.gate, name="api-drift-gate"),
    path("drift/agents/<str:agent_id>/pre-invocation", drift.pre_invocation_view, name="api-drift-pre-invocation"),
    path("suites", views.suite_list, name="api-suites"),
    path("suites/<int:suite_id>/run", views.suite_run, name="api-suite-run"),
    path("suites/runs/<str:run_id>", views.suite_run_detail, name="api-suite-run-detail"),
]
