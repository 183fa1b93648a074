"""What the realism note beside a comparison's verdict costs: a batch of 8 personas (RUNS completed simulated runs
each, TURNS student turns a run, one simulator model), its comparison group's notes worked out cold (a process that
has not seen them: a new worker, or the first view after a run of the persona completed) and warm (the same process
again), and the API's comparison endpoint, which carries the notes. Median (min-max, n) of REPEATS, in ms.
"cold" forgets every kept note and the reference's noise; "new process" forgets this process's own (the notes' files under RUNS_DIR stay,
as they do for a web process after the worker that finished the batch wrote them).
Run it from a tree of an earlier commit (git archive REV | tar -x -C DIR; copy this file in) for the figures before.

python bench/realism_note.py [--runs 40] [--turns 8] [--repeats 7]
"""

import argparse
import shutil
import time
from datetime import timedelta
from pathlib import Path

from _django import setup
from _harness import load_average, spread

setup(fresh_database=True)

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.utils import timezone  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from evaluation.conf import setting  # noqa: E402
from evaluation.models import EvaluationRun, Persona, RunMessage  # noqa: E402
from evaluation.tutoring import realism, realism_sets, selectors  # noqa: E402

SIMULATOR = {"llm": {"simulator": {"provider": "openai", "model": "chatty-1"}}}
CHATTY = "Well I think that if we add the two fractions we get five eighths because the bottoms are the same"


def fill(runs: int, turns: int) -> None:
    now = timezone.now()
    for persona in Persona.objects.all():
        made = EvaluationRun.objects.bulk_create(
            EvaluationRun(
                run_id=f"run_{persona.persona_id}_{i}",
                status="completed",
                stage="completed",
                persona=persona,
                group="cmp" if i < 2 else "",
                config=SIMULATOR,
                completed_at=now - timedelta(minutes=i),
            )
            for i in range(runs)
        )
        RunMessage.objects.bulk_create(
            RunMessage(
                run=run,
                turn=t,
                role="tutor" if t % 2 else "student",
                content="What is 3/8 + 2/8?" if t % 2 else CHATTY + f" {t}",
                timestamp=now,
            )
            for run in made
            for t in range(1, 2 * turns + 1)
        )


def new_process() -> None:
    """Forget what this process knows of the notes."""
    realism_sets._NOTES.clear()
    cache.clear()


def cold() -> None:
    """Forget every kept note: this process's and the files."""
    new_process()
    getattr(realism, "_NOISE", {}).clear()  # a new process has no reference noise worked out either
    folder = getattr(realism_sets, "NOTES_FOLDER", None)
    if folder:
        shutil.rmtree(Path(setting("RUNS_DIR")) / folder, ignore_errors=True)


def timed(work, repeats: int, *, before=None) -> list[float]:
    out = []
    for _ in range(repeats):
        if before:
            before()
        started = time.perf_counter()
        work()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    fill(args.runs, args.turns)
    user = get_user_model().objects.create_superuser("bench", "bench@example.org", "x")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    notes = selectors.group_realism_of("cmp")
    assert len(notes) == Persona.objects.count(), notes
    print(f"{Persona.objects.count()} personas x {args.runs} runs x {args.turns} student turns; {load_average()}")
    print(
        f"notes of a comparison, cold: {spread(timed(lambda: selectors.group_realism_of('cmp'), args.repeats, before=cold), '{:.0f}')} ms"
    )
    print(
        f"notes of a comparison, new process: {spread(timed(lambda: selectors.group_realism_of('cmp'), args.repeats, before=new_process), '{:.1f}')} ms"
    )
    print(
        f"notes of a comparison, warm: {spread(timed(lambda: selectors.group_realism_of('cmp'), args.repeats), '{:.1f}')} ms"
    )

    def page() -> None:
        got = api.get("/api/evaluation/comparisons/cmp")
        assert got.status_code == 200, got.content[:300]

    print(f"GET /api/evaluation/comparisons/cmp, cold: {spread(timed(page, args.repeats, before=cold), '{:.0f}')} ms")
    print(
        f"GET /api/evaluation/comparisons/cmp, new process: {spread(timed(page, args.repeats, before=new_process), '{:.1f}')} ms"
    )
    print(f"GET /api/evaluation/comparisons/cmp, warm: {spread(timed(page, args.repeats), '{:.1f}')} ms")


if __name__ == "__main__":
    main()
