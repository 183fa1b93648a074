"""bench/realism_note.py runs to its figures on a small workload (as tests/test_bench_scripts.py checks the others)."""

from tests.test_bench_scripts import _run


def test_the_realism_note_benchmark_runs_to_its_figures(tmp_path):
    out = _run("realism_note.py", ["--runs", "6", "--turns", "4", "--repeats", "1"], tmp_path, timeout=180)
    assert "notes of a comparison, new process:" in out and "GET /api/evaluation/comparisons/cmp, cold:" in out
