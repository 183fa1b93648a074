"""The demo command and the CLI's progress display: what a new user sees after bin/demo."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.management.progress import RunProgress
from evaluation.models import EvaluationRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_demo_off_a_terminal_prints_one_line_per_persona_and_what_to_do_next(server, settings, staff_client):
    out = StringIO()
    call_command("demo", max_turns=3, workers=2, stdout=out)
    text = out.getvalue()
    lines = text.splitlines()
    # quiet off a terminal: one line per finished run, no per-turn lines, no bar characters
    finished = [line for line in lines if " completed after " in line]
    assert len(finished) == 8, text
    assert "Turn " not in text and "━" not in text and "\x1b[" not in text
    next_steps = lines[lines.index("Next:") :]
    report = next(line.split()[-1] for line in next_steps if "lowest-scoring report" in line)
    assert Path(report).name == "review.md" and Path(report).is_file()
    assert Path(report).parent.parent == Path(settings.EVALUATION["RUNS_DIR"])
    assert any(line.endswith("manage.py createsuperuser") for line in next_steps)
    assert any(line.endswith("manage.py runserver") for line in next_steps)
    assert any(line.endswith("http://127.0.0.1:8000/admin/evaluation/") for line in next_steps)
    # every call went to the offline provider, and the report says so instead of counting "LLM calls"
    run = EvaluationRun.objects.get(run_id=Path(report).parent.name)
    assert set(run.token_usage["by_provider"]) == {"offline"} and run.token_usage["calls"] > 0
    page = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    assert "Offline: no LLM was called" in page and "LLM calls" not in page


class Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def status(run_id: str, run_status: str, stage: str, turn: int, max_turns: int = 20) -> dict:
    return {"run_id": run_id, "run_status": run_status, "status": stage, "turn": turn, "max_turns": max_turns}


def test_on_a_terminal_each_run_has_a_bar_with_its_turns_and_stage():
    screen = Terminal()
    with RunProgress(screen, {"r1": "ace", "r2": "struggler"}) as progress:
        progress(status("r1", "running", "running_session", 4))
        progress(status("r2", "running", "evaluating", 7))
        progress.progress.refresh()
        frame = screen.getvalue()
        progress(status("r1", "completed", "completed", 9))
    assert "ace" in frame and "struggler" in frame and "━" in frame
    assert "4/20" in frame and "running_session" in frame and "7/20" in frame and "evaluating" in frame
    # a finished run's bar is full at the turns it took
    assert "9/9" in screen.getvalue() and "completed" in screen.getvalue()
