"""Dashboard and report pages, under /admin/evaluation/."""

from django.urls import path

from evaluation.web import views

urlpatterns = [
    path("", views.dashboard, name="evaluation-dashboard"),
    path("start", views.start, name="evaluation-start"),
    path("charts/", views.charts, name="evaluation-charts"),
    path("runs/status.json", views.runs_status, name="evaluation-runs-status"),
    path("runs/<str:run_id>/", views.run_report, name="evaluation-run-report"),
    path("runs/<str:run_id>/live.json", views.run_live, name="evaluation-run-live"),
    path("runs/<str:run_id>/files/<str:name>", views.run_artifact, name="evaluation-run-file"),
    path("runs/<str:run_id>/retry", views.run_retry, name="evaluation-run-retry"),
    path("runs/<str:run_id>/again", views.run_again, name="evaluation-run-again"),
    path("runs/<str:run_id>/cancel", views.run_cancel, name="evaluation-run-cancel"),
    path("comparisons/<str:group>/", views.comparison, name="evaluation-comparison"),
    path("suites/runs/<str:run_id>/", views.suite_run, name="evaluation-suite-run"),
    path("drift/<str:agent_id>/", views.drift_agent, name="evaluation-drift-agent"),
]
