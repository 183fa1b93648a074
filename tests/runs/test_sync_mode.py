"""django-q2's sync mode (the CLI's EVAL_Q_SYNC, tests) runs a task through the worker function in the
calling process: it sweeps once, but starts no sweeper thread that would outlive the task."""

import threading

import pytest

from evaluation.runs import services as run_services
from evaluation.tasks import sweep_on_worker_start


@pytest.mark.django_db
def test_a_task_run_in_sync_mode_leaves_no_sweeper_thread_behind(q_sync, monkeypatch):
    monkeypatch.setattr(run_services, "_sweeper", None)
    sweepers = [t for t in threading.enumerate() if t.name == "runs-sweeper"]
    sweep_on_worker_start(proc_name="sync")
    assert run_services._sweeper is None
    assert [t for t in threading.enumerate() if t.name == "runs-sweeper"] == sweepers
