"""Concurrent load on a real web server process: the API's run list and a run's report page while two runs
are active. Errors, p50, p99 and requests/s at each concurrency, over several repeats.

python bench/api_load.py [--concurrency 50 200] [--requests 400] [--repeats 5] [--postgres] [--web-processes 1]

SQLite in a temporary folder by default; the database DATABASE_URL names when it is set (it is
migrated and seeded); --postgres starts a throwaway PostgreSQL cluster on loopback for the run.
The two active runs are simulated, not driven by a qcluster: both are marked running and a writer
thread stores a message and beats the heartbeat for each every 0.25 s, the writes a worker makes
per turn. Each repeat sends --requests requests, half to /api/evaluation/runs (token) and half to
/admin/evaluation/runs/<run_id>/ (a staff session), at most --concurrency at a time, after a
warm-up that is not counted. The load generator shares the machine's cores with the server; each line
ends with the 1-minute load average, since other work on the machine moves the figures.
--web-processes N starts N processes on one listening socket (`--fd`, docs/scaling.md); --server picks
uvicorn (the documented web server, the default) or daphne (manage.py runserver's), to compare them.
"""

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _django import ROOT, percentile
from _harness import WEB_SERVERS, postgres_cluster, tree_cpu, web_processes

WARMUP = 50


def seed(runs: int) -> tuple[str, str, str]:
    """Migrate, add a staff user, `runs` finished runs with a transcript and 2 running ones.
    The user's API token, a logged-in session key, and the run id whose report is fetched."""
    import django

    django.setup()
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from evaluation.models import EvaluationRun, RunMessage

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", "bench@example.com", "pw-bench-staff-1", is_staff=True)
    user.is_superuser = True
    user.save()
    now = timezone.now()
    finished = EvaluationRun.objects.bulk_create(
        EvaluationRun(run_id=f"bench_{i:04d}", status="completed", stage="completed", overall_score=5 + i % 40 / 10)
        for i in range(runs)
    )
    RunMessage.objects.bulk_create(
        RunMessage(run=run, turn=t // 2 + 1, role=("student", "tutor")[t % 2], content=f"message {t}", timestamp=now)
        for run in finished[:20]
        for t in range(20)
    )
    for i in range(2):
        EvaluationRun.objects.create(run_id=f"active_{i}", status="running", stage="running_session", heartbeat_at=now)
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return Token.objects.create(user=user).key, session.session_key or "", finished[0].run_id


class ActiveRuns:
    """Two running runs' writes: a message and a heartbeat for each every 0.25 s, as a worker's turns."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self.writes = 0

    def _write(self) -> None:
        from django.db import connection, transaction
        from django.utils import timezone

        from evaluation.models import EvaluationRun, RunMessage

        try:
            runs = list(EvaluationRun.objects.filter(run_id__startswith="active_"))
            turn = 0
            while not self._stop.wait(0.25):
                turn += 1
                for run in runs:
                    with transaction.atomic():
                        RunMessage.objects.create(
                            run=run, turn=turn, role="student", content=f"turn {turn}", timestamp=timezone.now()
                        )
                        EvaluationRun.objects.filter(pk=run.pk).update(turn=turn, heartbeat_at=timezone.now())
                    self.writes += 1
        finally:
            connection.close()

    def __enter__(self) -> "ActiveRuns":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


async def load(url: str, paths: list[tuple[str, dict]], concurrency: int) -> tuple[list[float], list[str], float]:
    """Fetch every (path, headers) with at most `concurrency` in flight: latencies (ms), errors, seconds."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    queue = list(reversed(paths))

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            path, headers = queue.pop()
            started = time.perf_counter()
            try:
                response = await client.get(url + path, headers=headers)
                if response.status_code != 200:
                    errors.append(f"{response.status_code} {path}")
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__} {path}")
            latencies.append((time.perf_counter() - started) * 1000)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return latencies, errors, time.perf_counter() - started


def spread(values: list[float], fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--requests", type=int, default=400, help="per repeat, half list and half report")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200, help="finished runs in the database")
    parser.add_argument("--postgres", action="store_true", help="start a throwaway PostgreSQL cluster")
    parser.add_argument("--web-processes", type=int, default=1, help="web server processes on one socket")
    parser.add_argument("--server", choices=sorted(WEB_SERVERS), default="uvicorn", help="the web server")
    args = parser.parse_args()

    os.environ["EVAL_DATA_DIR"] = tempfile.mkdtemp(prefix="eval-bench-load-")
    try:
        run(args)
    finally:
        shutil.rmtree(os.environ["EVAL_DATA_DIR"], ignore_errors=True)


def run(args: argparse.Namespace) -> None:
    with postgres_cluster() if args.postgres else _nothing(os.environ.get("DATABASE_URL")) as database_url:
        database_url = database_url or f"sqlite:///{os.environ['EVAL_DATA_DIR']}/db.sqlite3"
        os.environ["DATABASE_URL"] = database_url
        token, session_key, report_run = seed(args.runs)
        from django.conf import settings

        db = settings.DATABASES["default"]
        pool = db.get("OPTIONS", {}).get("pool")
        print(
            f"database: {db['ENGINE'].rsplit('.', 1)[-1]}"
            + (f", pool {pool}" if pool else "")
            + f"; {args.web_processes} {args.server} process(es); {os.cpu_count()} cores"
        )
        env = {"EVAL_TUTOR_PROVIDER": "offline", "EVAL_LLM_PROVIDER": "", "DATABASE_URL": database_url}
        log = Path(os.environ["EVAL_DATA_DIR"]) / f"{args.server}.log"
        api = ("/api/evaluation/runs", {"Authorization": f"Token {token}"})
        report = (f"/admin/evaluation/runs/{report_run}/", {"Cookie": f"sessionid={session_key}"})
        with web_processes(env, args.web_processes, log, args.server) as (url, _), ActiveRuns() as active:
            asyncio.run(load(url, [api, report] * (WARMUP // 2), 10))
            for concurrency in args.concurrency:
                p50s, p99s, rates, error_counts, server_cpu, client_cpu = [], [], [], [], [], []
                for _ in range(args.repeats):
                    tree, own = tree_cpu(), time.process_time()
                    latencies, errors, seconds = asyncio.run(
                        load(url, [api, report] * (args.requests // 2), concurrency)
                    )
                    own = time.process_time() - own
                    server_cpu.append((tree_cpu() - tree - own) / len(latencies) * 1000)
                    client_cpu.append(own / len(latencies) * 1000)
                    p50s.append(percentile(latencies, 50))
                    p99s.append(percentile(latencies, 99))
                    rates.append(len(latencies) / seconds)
                    error_counts.append(len(errors))
                    if errors:
                        print(f"  errors: {sorted(set(errors))[:5]}")
                print(
                    f"concurrency {concurrency:>3}: errors {sum(error_counts)}/{args.requests * args.repeats}   "
                    f"p50 {spread(p50s)} ms   p99 {spread(p99s)} ms   {spread(rates)} req/s   "
                    f"(median (min-max) of {args.repeats} repeats of {args.requests}; "
                    f"load average {os.getloadavg()[0]:.1f})"
                )
                print(
                    f"  CPU per request: web processes {spread(server_cpu, '{:.1f}')} ms, load generator {spread(client_cpu, '{:.1f}')} ms (with the active runs' writer)"
                )
        locked = "database is locked" in log.read_text(errors="replace")
        print(f"active runs' writes meanwhile: {active.writes}; 'database is locked' in the server log: {locked}")


@contextmanager
def _nothing(value: str | None) -> Iterator[str | None]:
    yield value


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
