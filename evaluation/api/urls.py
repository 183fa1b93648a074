"""REST API routes: one view per operation; /api/docs/ and /api/redoc/ describe them all."""

from django.urls import path

from evaluation.api import catalogue, docs, drift, index, judging, queues, realism, runs, suites, tutoring

urlpatterns = [
    path("", index.IndexView.as_view(), name="api-index"),
    # the tutor runs' paths, kept as their first clients know them
    path("evaluation/start", tutoring.StartView.as_view(), name="api-evaluation-start"),
    path("evaluation/status", runs.CurrentStatusView.as_view(), name="api-evaluation-status"),
    path("evaluation/runs", runs.RunListView.as_view(), name="api-evaluation-runs"),
    path("evaluation/runs/export", runs.RunExportView.as_view(), name="api-evaluation-runs-export"),
    path("evaluation/runs/<str:run_id>", runs.RunDetailView.as_view(), name="api-evaluation-run"),
    path("evaluation/runs/<str:run_id>/status", runs.RunStatusView.as_view(), name="api-evaluation-run-status"),
    path(
        "evaluation/runs/<str:run_id>/retry-evaluation",
        tutoring.RetryEvaluationView.as_view(),
        name="api-evaluation-retry",
    ),
    path("evaluation/runs/<str:run_id>/retry", runs.RunRetryView.as_view(), name="api-run-retry"),
    path("evaluation/runs/<str:run_id>/cancel", runs.RunCancelView.as_view(), name="api-run-cancel"),
    path("evaluation/comparisons/<str:group>", tutoring.ComparisonView.as_view(), name="api-evaluation-comparison"),
    path("tutoring/realism", realism.RealismView.as_view(), name="api-tutoring-realism"),
    path("evaluation/evaluate-session", tutoring.EvaluateSessionView.as_view(), name="api-evaluation-session"),
    path("drift/messages", drift.IngestView.as_view(), name="api-drift-ingest"),
    path("drift/agents/<str:agent_id>/evaluate", drift.DriftEvaluateView.as_view(), name="api-drift-evaluate"),
    path("drift/agents/<str:agent_id>/gate", drift.GateView.as_view(), name="api-drift-gate"),
    path(
        "drift/agents/<str:agent_id>/pre-invocation",
        drift.PreInvocationView.as_view(),
        name="api-drift-pre-invocation",
    ),
    path("suites", suites.SuiteListView.as_view(), name="api-suites"),
    path("suites/<int:suite_id>", suites.SuiteDetailView.as_view(), name="api-suite"),
    path("suites/<int:suite_id>/run", suites.SuiteRunStartView.as_view(), name="api-suite-run"),
    path("suites/runs/<str:run_id>", suites.SuiteRunDetailView.as_view(), name="api-suite-run-detail"),
    path("catalogue/topics", catalogue.TopicListView.as_view(), name="api-topics"),
    path("catalogue/topics/<str:topic_id>", catalogue.TopicDetailView.as_view(), name="api-topic"),
    path("catalogue/personas", catalogue.PersonaListView.as_view(), name="api-personas"),
    path("catalogue/personas/<str:persona_id>", catalogue.PersonaDetailView.as_view(), name="api-persona"),
    path("catalogue/agents", catalogue.AgentListView.as_view(), name="api-agents"),
    path("catalogue/agents/<str:agent_id>", catalogue.AgentDetailView.as_view(), name="api-agent"),
    path("judging/import", judging.ImportView.as_view(), name="api-judging-import"),
    path("judging/agreement", judging.AgreementView.as_view(), name="api-judging-agreement"),
    path("judging/estimates", judging.EstimatesView.as_view(), name="api-judging-estimates"),
    path("judging/jobs", judging.JudgingJobsView.as_view(), name="api-judging-jobs"),
    path("judging/queues", queues.QueuesView.as_view(), name="api-judging-queues"),
    path("judging/queues/<int:queue_id>", queues.QueueView.as_view(), name="api-judging-queue"),
    path("judging/queues/<int:queue_id>/items", queues.QueueItemsView.as_view(), name="api-judging-queue-items"),
    path("judging/queues/<int:queue_id>/people", queues.QueuePeopleView.as_view(), name="api-judging-queue-people"),
    path("judging/queues/<int:queue_id>/next", queues.QueueNextView.as_view(), name="api-judging-queue-next"),
    path("judging/queues/<int:queue_id>/labels", queues.QueueLabelsView.as_view(), name="api-judging-queue-labels"),
    path(
        "judging/queues/<int:queue_id>/adjudications",
        queues.QueueAdjudicationsView.as_view(),
        name="api-judging-queue-adjudications",
    ),
    # the schema's pages (evaluation.api.docs: their scripts from this server, inline parts by nonce)
    path(
        "docs/",
        docs.swagger_view(url_name="schema"),
        name="api-docs",
    ),
    path(
        "redoc/",
        docs.redoc_view(url_name="schema"),
        name="api-redoc",
    ),
    path("redoc/redoc.standalone.js", docs.redoc_bundle, name="api-redoc-bundle"),
]
