"""The pytest plugin, run as a user would: a pytest subprocess over a folder of EVAL.md files."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.providers.loopback import Reply

from .test_runner_and_cache import responder

ROOT = Path(__file__).resolve().parents[2]


def run_pytest(folder, *args):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "evalproject.settings",
        "PYTHONPATH": str(ROOT),
        "EVAL_DATA_DIR": str(folder / "data"),
        "EVAL_SUITE_DIRS": str(folder),
    }
    # Without the schema-testing plugins this environment also installs (they import Hypothesis, half a
    # pytest start's CPU); the plugin under test and pytest-django load as they would anywhere.
    quiet = ["-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *quiet, "-q", "-rA", str(folder), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def suite_dir(tmp_path):
    folder = tmp_path / "evals" / "greeter"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("Greet people by name.")
    (folder / "EVAL.md").write_text(
        "## greets by name\n### Prompt\nHi, I'm Sam\n### Expect\nGreets Sam by name.\n\n## stays polite\n### Prompt\nHello\n### Expect\nPolite.\n"
    )
    return tmp_path / "evals"


def test_eval_cases_are_left_out_of_the_default_run(suite_dir):
    code, out = run_pytest(suite_dir)
    assert "2 deselected" in out, out


def test_eval_flag_runs_items_named_by_folder_and_case(suite_dir, loopback):
    loopback.responder = responder(warning="Slightly formal.")
    model = f"openai/m@{loopback.openai_url}"
    code, out = run_pytest(suite_dir, "--eval", "--eval-model", model, "--eval-judge-model", model)
    assert code == 0, out
    assert "PASSED greeter/EVAL.md::greeter: greets by name" in out and "2 passed" in out
    assert "greeter: greets by name: WARNING: Slightly formal." in out
    assert loopback.count() == 4


def test_marker_selection_and_failure_output(suite_dir, loopback):
    loopback.responder = responder(verdicts={"User prompt\\nHello\\n": "FAIL"})
    model = f"openai/m@{loopback.openai_url}"
    code, out = run_pytest(suite_dir, "-m", "eval", "--eval-model", model, "--eval-judge-model", model)
    assert code == 1 and "1 failed, 1 passed" in out, out
    assert "FAILED judge: judged FAIL" in out and "--- transcript ---" in out and "prompt: Hello" in out


def test_cache_option_skips_a_second_run(suite_dir, loopback, tmp_path):
    model = f"openai/m@{loopback.openai_url}"
    loopback.responder = responder()
    cache = tmp_path / "shared_cache.json"
    run_pytest(suite_dir, "--eval", "--eval-model", model, "--eval-judge-model", model, "--eval-cache", str(cache))
    before = loopback.count()
    code, out = run_pytest(
        suite_dir, "--eval", "--eval-model", model, "--eval-judge-model", model, "--eval-cache", str(cache)
    )
    assert code == 0 and loopback.count() == before and "2 passed" in out


def test_a_malformed_file_is_a_collection_error_with_file_and_line(suite_dir):
    (suite_dir / "greeter" / "EVAL.md").write_text("## broken\n### Prompt\nhi\n")
    code, out = run_pytest(suite_dir, "--eval")
    assert code != 0 and "EVAL.md:1: case 'broken': the Expect section is missing" in out


MODULE_WITH_EVAL = """\
EVAL = \"\"\"
## says hello
### Prompt
Hi
### Expect
Says hello.
\"\"\"


def greet(name: str) -> str:
    \"\"\"Greet someone.\"\"\"
    return f"Hello {name}"


TOOLS = [greet]
"""


def test_a_modules_eval_string_is_a_suite_anchored_to_it(tmp_path, loopback):
    """Doctest-style: an `EVAL` string in a module listed under eval_modules."""
    folder = tmp_path / "evals"
    folder.mkdir()
    (folder / "greeting.py").write_text(MODULE_WITH_EVAL)
    (folder / "pytest.ini").write_text("[pytest]\neval_modules = greeting.py\n")
    loopback.responder = responder()
    model = f"openai/m@{loopback.openai_url}"
    code, out = run_pytest(folder, "--eval", "--eval-model", model, "--eval-judge-model", model)
    assert code == 0 and "PASSED greeting.py::greeting: says hello" in out, out
    assert loopback.requests[0].body["tools"][0]["function"]["name"] == "greet"  # the module's own TOOLS are offered


def test_the_summary_names_the_judge_that_ran(suite_dir, loopback):
    loopback.responder = responder()
    model = f"openai/m@{loopback.openai_url}"
    code, out = run_pytest(suite_dir, "--eval", "--eval-model", model, "--eval-judge-model", model)
    assert code == 0 and "judge: openai/m" in out, out
    # an agent model alone: the offline judge gave the verdicts, and the summary says so
    code, out = run_pytest(suite_dir, "--eval", "--eval-model", model)
    assert "judge: offline rule-based judge (no judge model set: pass --eval-judge-model" in out, out


def test_repeats_pass_only_when_every_repeat_passes(suite_dir, loopback):
    """The judge fails the second of three judgements of 'stays polite': pass^3 fails, 2/3 passed."""
    judged = {"n": 0}
    base = responder()

    def flaky(endpoint, body, n):
        reply = base(endpoint, body, n)
        if reply.json is not None and "Hello\\n" in json.dumps(body.get("messages")):
            judged["n"] += 1
            if judged["n"] == 2:
                return Reply(json={"verdict": "FAIL", "reason": "judged FAIL", "warning": None})
        return reply

    loopback.responder = flaky
    model = f"openai/m@{loopback.openai_url}"
    code, out = run_pytest(
        suite_dir, "--eval", "--eval-model", model, "--eval-judge-model", model, "--eval-repeats", "3"
    )
    assert code == 1 and "1 failed, 1 passed" in out, out
    assert "pass^3 FAIL greeter: stays polite  2/3 passed, mean 0.67 (95% CI 0.21-0.94)" in out
    assert "pass^3 PASS greeter: greets by name  3/3 passed, mean 1.00 (95% CI 0.44-1.00)" in out
    assert "greeter: stays polite (repeat 2)" in out and loopback.count() == 12
