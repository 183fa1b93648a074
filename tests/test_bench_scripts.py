"""Every benchmark script in bench/ runs to its figures on a small workload, so none rots unnoticed
between the sessions that take figures (two had: a run stage the database no longer accepts, and a
persona passed as a dict where the simulator takes a PersonaSpec). The figures themselves are the
scripts' business, on their full workloads (bench/README.md); this only checks that each one runs and
prints them."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SERVICES = shutil.which("redis-server") is not None and any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))

SCRIPTS = [
    ("tutoring_offline.py", ["--turns", "2", "--repeats", "1"], "harness CPU per turn, process tree"),
    (
        "tutoring_loopback.py",
        ["--turns", "2", "--latency", "0", "--repeats", "1", "--no-single"],
        "CPU per turn (worker + tutor server)",
    ),
    ("providers_overhead.py", ["--calls", "5", "--repeats", "1"], "openai chat: get_llm (urllib3)"),
    ("api_load.py", ["--concurrency", "5", "--requests", "20", "--repeats", "1", "--runs", "10"], "errors 0/20"),
    ("bad_input.py", ["--repeats", "1"], "EVAL.md: 100,000 cases"),
    ("dashboard_list.py", ["--runs", "30"], "report page of one run"),
    ("suites.py", ["--cases", "50", "--cached", "5", "--repeats", "1"], "LLM calls [0]"),
    ("drift_measures.py", ["--repeats", "1"], "x4 messages"),
    ("simulator_fidelity.py", ["--turns", "20", "--trials", "2"], "largest difference at seed"),
    ("agreement.py", ["--dialogues", "12", "--candidates", "2", "--repeats", "1"], "kappa"),
    ("estimates.py", ["--seeds", "30", "--items", "400"], "corrected width / people-only width"),
    ("queues.py", ["--queue", "4", "--items", "300", "--labels", "10", "--seeds", "3"], "label next / random"),
    (
        "gate_power.py",
        ["--trials", "1", "--personas", "3", "--max-turns", "2", "--k", "2"],
        "k=1 against a 2-run baseline: false alarms",
    ),
    ("realism_note.py", ["--runs", "6", "--turns", "8", "--repeats", "1"], "GET /api/evaluation/comparisons/cmp, cold"),
    (
        "judging_cost.py",
        ["--items", "40", "--warmup", "2", "--latency", "0", "--rpm", "100000", "--workers", "4", "--mode", "batch"],
        "prompt tokens at the full input price, caching on / off",
    ),
]


@pytest.mark.parametrize(("script", "args", "figure"), SCRIPTS, ids=[s for s, _, _ in SCRIPTS])
def test_a_benchmark_script_runs_to_its_figures(script, args, figure, tmp_path):
    assert figure in _run(script, args, tmp_path, timeout=180), f"{script} printed no {figure!r}"


@pytest.mark.skipif(not SERVICES, reason="needs redis-server and PostgreSQL's binaries (.ci/run installs both)")
def test_the_scale_out_benchmark_runs_on_its_own_postgresql_and_redis(tmp_path):
    args = ["--conversations", "8", "--turns", "1", "--latency", "0.01", "--repeats", "1"]
    out = _run("scale_out.py", args, tmp_path, timeout=300)
    assert "failed runs per batch: [0]" in out and "runs per worker 1-1" in out, out[-3000:]


@pytest.mark.skipif(not SERVICES, reason="needs redis-server and PostgreSQL's binaries (.ci/run installs both)")
def test_the_fault_drill_runs_to_its_verdict_on_its_own_postgresql_and_redis(tmp_path):
    """One fault on a tiny batch, survived: a Redis restart (tests/runs/test_faults.py has the PostgreSQL
    restart and the web kill). It once passed with 0/1 allowed while one run in three crawled at 20 s a turn,
    its worker's small pool drained by the run's own heartbeat."""
    args = ["--runs", "2", "--turns", "10", "--latency", "0.1", "--stale-after", "5", "--faults", "redis-restart"]
    out = _run("faults.py", args, tmp_path, timeout=300)
    assert "redis-restart: redis-server stopped" in out and "messages lost 0" in out, out[-3000:]
    assert out.rstrip().splitlines()[-1] == "faults survived 1/1", out[-3000:]


@pytest.mark.skipif(not SERVICES, reason="needs redis-server and PostgreSQL's binaries (.ci/run installs both)")
def test_the_connections_benchmark_runs_on_its_own_postgresql_and_redis(tmp_path):
    args = ["--clusters", "1", "--workers", "2", "--conversations", "8", "--turns", "1", "--latency", "0.01"]
    out = _run("connections.py", [*args, "--settle", "1"], tmp_path, timeout=300)
    assert "{'completed': 8}" in out and "bound (manage.py check)" in out, out[-3000:]


def test_every_script_in_bench_is_run_here():
    shared = {"_django.py", "_harness.py", "__init__.py", "fake_llm.py"}
    scripts = {p.name for p in (ROOT / "bench").glob("*.py")} - shared
    assert scripts == {s for s, _, _ in SCRIPTS} | {"scale_out.py", "faults.py", "connections.py"}


def _run(script: str, args: list[str], folder: Path, *, timeout: int, exit_codes: tuple[int, ...] = (0,)) -> str:
    """The script's output; it runs on its own databases and servers, as from a shell (bench/README.md)."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["EVAL_DATA_DIR"] = str(folder)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode in exit_codes, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout
