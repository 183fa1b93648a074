"""The run list and a report page with 10,000 runs in the database: render time (median (min-max) of
20 requests after one warm-up request) and SQL queries.

python bench/dashboard_list.py [--runs 10000] [--messages 20]
"""

import argparse
import time
import uuid

from _django import setup
from _harness import spread

setup(fresh_database=True)

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from evaluation.models import DimensionScore, EvaluationRun, Persona, Problem, RunMessage, Topic  # noqa: E402
from evaluation.models.runs import RunStage, RunStatus  # noqa: E402

DIMS = ["responsiveness", "explanation_quality", "emotional_attunement", "pacing", "authenticity"]


def fill(runs: int, messages: int) -> None:
    personas = list(Persona.objects.all())
    topics = list(Topic.objects.all())
    now = timezone.now()
    batch = 1000
    for start in range(0, runs, batch):
        created = EvaluationRun.objects.bulk_create(
            EvaluationRun(
                run_id=f"run_bench_{i:05d}_{uuid.uuid4().hex[:4]}",
                persona=personas[i % len(personas)],
                topic=topics[i % len(topics)],
                status=RunStatus.COMPLETED if i % 10 else RunStatus.FAILED,
                stage=RunStage.COMPLETED if i % 10 else RunStage.FAILED,
                overall_score=5 + (i % 40) / 10,
            )
            for i in range(start, min(runs, start + batch))
        )
        DimensionScore.objects.bulk_create(
            DimensionScore(run=r, dimension=d, score=1 + (i * 3 + k) % 10)
            for i, r in enumerate(created)
            for k, d in enumerate(DIMS)
        )
        RunMessage.objects.bulk_create(
            RunMessage(
                run=r,
                turn=t,
                role="tutor" if t % 2 else "student",
                content=f"Message {t} of the conversation.",
                timestamp=now,
            )
            for r in created
            for t in range(1, messages + 1)
        )
        Problem.objects.bulk_create(
            Problem(
                run=r,
                rank=1,
                title="Too long",
                turns=[1],
                quote="Message 1",
                severity="minor",
                root_cause="wrong_pacing",
            )
            for r in created
        )


def timed(client: Client, url: str, n: int = 20) -> tuple[list[float], int]:
    """Render times (ms) of n requests after one warm-up request, and the SQL queries of the last."""
    client.get(url)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return times, len(ctx.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    fill(args.runs, args.messages)
    print(
        f"created {args.runs} runs with {args.messages} messages, 5 scores and 1 problem each in {time.perf_counter() - started:.1f} s (SQLite)"
    )
    user = get_user_model().objects.create_user("bench", password="x", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    last = EvaluationRun.objects.order_by("created_at").first()
    pages = [
        ("run list, page 1", "/admin/evaluation/"),
        ("run list, last page", f"/admin/evaluation/?page={(args.runs + 23) // 24}"),
        ("run list, filtered by persona+status", "/admin/evaluation/?persona=ace&status=completed"),
        ("report page of one run", f"/admin/evaluation/runs/{last.run_id}/"),
    ]
    for label, url in pages:
        times, queries = timed(client, url)
        print(f"{label:<40} {spread(times, '{:.1f}')} ms   {queries} SQL queries")


if __name__ == "__main__":
    main()
