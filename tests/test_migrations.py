"""The run-kernel migration carries existing runs over: statuses renamed, drift and suite data in their tables."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("evaluation", "0002_agent_extra")]
AFTER = [("evaluation", "0003_run_kernel")]


@pytest.mark.django_db(transaction=True)
def test_run_kernel_migration_moves_old_runs():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    agent = old.get_model("evaluation", "Agent").objects.create(id="rex", display_name="Rex", kind="character")
    suite = old.get_model("evaluation", "Suite").objects.create(path="skills/x/EVAL.md", name="x")
    Run = old.get_model("evaluation", "EvaluationRun")
    Run.objects.create(
        run_id="drift_old",
        kind="drift",
        status="completed",
        stage="complete",
        agent=agent,
        dimensions=["adherence", "fluency"],
        sample_size=12,
        is_baseline=True,
        config={"sample_size": 20, "source": "cast"},
    )
    Run.objects.create(run_id="suite_old", kind="suite", status="pending", stage="idle", config={"suite_id": suite.pk})

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Run = new.get_model("evaluation", "EvaluationRun")
    drift = new.get_model("evaluation", "DriftRun").objects.get(run__run_id="drift_old")
    assert (drift.dimensions, drift.messages_judged, drift.sample_size, drift.source, drift.is_baseline) == (
        ["adherence", "fluency"],
        12,
        20,
        "cast",
        True,
    )
    suite_run = new.get_model("evaluation", "SuiteRun").objects.get(run__run_id="suite_old")
    assert suite_run.suite_id == suite.pk and suite_run.suite_path == "skills/x/EVAL.md"
    assert Run.objects.get(run_id="suite_old").status == "queued"
    assert Run.objects.get(run_id="suite_old").stage == "queued"
    assert Run.objects.get(run_id="drift_old").stage == "completed"
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
