"""Dashboard and report pages, under /admin/evaluation/."""

from django.urls import path

from evaluation.web import judging, queues, realism, views

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
    path("runs/<str:run_id>/labels", judging.run_labels, name="evaluation-run-labels"),
    path("comparisons/<str:group>/", views.comparison, name="evaluation-comparison"),
    path("suites/runs/<str:run_id>/", views.suite_run, name="evaluation-suite-run"),
    path("realism/", realism.realism, name="evaluation-realism"),
    path("drift/", views.drift_index, name="evaluation-drift-index"),
    path("drift/<str:agent_id>/", views.drift_agent, name="evaluation-drift-agent"),
    path("judging/", judging.judge_cards, name="evaluation-judging"),
    path("judging/import", judging.transcripts_upload, name="evaluation-judging-import"),
    path("judging/<int:configuration_id>/", judging.judge_card, name="evaluation-judge-card"),
    path("judging/transcripts/<int:transcript_id>/", judging.transcript, name="evaluation-transcript"),
    path("judging/<int:configuration_id>/queue", queues.queue_from_card, name="evaluation-queue-from-card"),
    path("judging/queues/", queues.queues, name="evaluation-queues"),
    path("judging/queues/<int:queue_id>/", queues.queue_page, name="evaluation-queue"),
    path("judging/queues/<int:queue_id>/label", queues.queue_label, name="evaluation-queue-label"),
    path("judging/queues/<int:queue_id>/adjudicate", queues.queue_adjudicate, name="evaluation-queue-adjudicate"),
    path("judging/queues/<int:queue_id>/labels.<str:fmt>", queues.queue_export, name="evaluation-queue-export"),
]
