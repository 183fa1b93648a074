"""A CLI batch stopped early leaves nothing behind: Ctrl-C (SIGINT) or SIGTERM (systemd's and docker's stop)
ends the run in progress saying so, cancels those not started and stops the command's own tutor server;
the runs of a batch whose process is gone (SIGKILL) are cancelled by the sweep and by status reads."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluation.models import EvaluationRun
from evaluation.runs import services as runs
from evaluation.tutoring import services
from tests.servers import ROOT, SERVER_ENV, database_url_for_tests

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"


def children(pid: int) -> list[int]:
    """The processes whose parent is pid (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_stopped_batch_cancels_its_runs_not_started_and_stops_its_own_server(catalog, loopback, tmp_path, sig):
    loopback.latency = 0.2  # the student takes a moment a turn: the stop lands mid-conversation
    env = {
        **os.environ,
        **SERVER_ENV,
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
        "EVAL_SERVER_URL": "",
    }
    command = [sys.executable, "manage.py", "run_evaluation", "--persona", "all", "--topic-id", TOPIC]
    command += ["--max-turns", "30", "--provider", f"openai/student@{loopback.openai_url}"]
    batch = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not EvaluationRun.objects.filter(status="running", turn__gte=2).exists():
            assert batch.poll() is None and time.monotonic() < deadline, batch.communicate(timeout=30)
            time.sleep(0.1)
        servers = children(batch.pid)
        assert servers, "the command runs its own tutor server"
        batch.send_signal(sig)
        out, err = batch.communicate(timeout=60)
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 128 + sig, (batch.returncode, err[-3000:])
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    made = list(EvaluationRun.objects.order_by("created_at").values_list("status", "error"))
    assert len(made) > 2 and not [s for s, _ in made if s in ("queued", "running")], made
    stopped = [e for s, e in made if s in ("failed", "cancelled")]
    assert stopped and all(name in e for e in stopped), made
    assert any(s == "cancelled" for s, _ in made), made
    assert "stopped: the batch was" in err and name in err and "Traceback" not in err, err[-3000:]
    deadline = time.monotonic() + 20
    while any(alive(pid) for pid in servers):
        assert time.monotonic() < deadline, f"the command's tutor server {servers} is still running"
        time.sleep(0.1)


def held_batch(catalog_topic: str = TOPIC) -> list[EvaluationRun]:
    return services.run_start(topic_id=catalog_topic, persona=["ace", "struggler"], max_turns=3, enqueue=False)


def a_gone_process() -> str:
    """host:pid of a process that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    return f"{socket.gethostname()}:{done.stdout.strip()}"


def test_a_batch_whose_process_is_gone_has_its_queued_runs_cancelled_by_the_sweep(catalog):
    made = held_batch()
    assert all(r.worker == runs.worker_id() for r in made)  # the creator is recorded
    assert runs.runs_sweep() == []  # its process (this one) lives: they wait for it
    EvaluationRun.objects.filter(pk__in=[r.pk for r in made]).update(worker=a_gone_process())
    assert sorted(runs.runs_sweep()) == sorted(r.run_id for r in made)
    for run in EvaluationRun.objects.all():
        assert run.status == "cancelled" and "has ended before starting it" in run.error, run.error


def test_a_batch_on_another_host_not_heard_from_is_cancelled_once_stale(catalog):
    made = held_batch()
    EvaluationRun.objects.filter(pk__in=[r.pk for r in made]).update(worker="elsewhere:1")
    assert runs.runs_cancel_orphaned(stale_after=60) == []  # heard from just now
    assert len(runs.runs_cancel_orphaned(stale_after=0)) == 2
    assert set(EvaluationRun.objects.values_list("status", flat=True)) == {"cancelled"}


def test_status_never_reports_a_dead_batchs_run_as_current(catalog, staff_client, monkeypatch):
    monkeypatch.setattr(runs, "_stale_read_at", -runs.STALE_ON_READ_EVERY)
    made = held_batch()
    EvaluationRun.objects.filter(pk__in=[r.pk for r in made]).update(worker=a_gone_process())
    body = staff_client.get("/api/evaluation/status").json()
    assert body["active_runs"] == 0 and body["run_status"] == "cancelled", body
