"""Runs stored before drift and suite runs had source values of their own are carried over."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("evaluation", "0007_roles")]
AFTER = [("evaluation", "0010_tutoring_run_sources")]


@pytest.mark.django_db(transaction=True)
def test_existing_drift_and_suite_runs_get_their_own_source():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    Run = executor.loader.project_state(BEFORE).apps.get_model("evaluation", "EvaluationRun")
    for kind, run_id in (("tutor", "run_a"), ("drift", "drift_a"), ("suite", "suite_a")):
        Run.objects.create(run_id=run_id, kind=kind, source="simulated")
    Run.objects.create(run_id="run_s", kind="tutor", source="existing_session")
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    Run = executor.loader.project_state(AFTER).apps.get_model("evaluation", "EvaluationRun")
    assert dict(Run.objects.values_list("run_id", "source")) == {
        "run_a": "simulated",
        "drift_a": "drift",
        "suite_a": "suite",
        "run_s": "existing_session",
    }
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
