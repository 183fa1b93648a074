"""Rate limits shared across workers, through the real SDKs against a loopback server that enforces rpm with
429s: threads and processes sharing one budget (in the database, in a real Redis) send far fewer requests
that come back 429 than the same work without it, and a Retry-After pauses every worker."""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from evaluation.models import RateLimitBudget
from evaluation.providers import Message, ProviderError, ProviderSpec, get_llm
from evaluation.providers.loopback import LoopbackLLMServer, Reply, default_responder, go_duration
from evaluation.providers.ratelimit import parse_duration, parse_time, read_headers
from tests.servers import database_url_for_tests, redis_server

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)
ASK = [Message("system", "You grade answers."), Message("user", "2+2=4?")]
VENDORS = {
    "openai-responses": ("openai", {"api": "responses"}),
    "openai-chat": ("openai", {"api": "chat"}),
    "anthropic": ("anthropic", {}),
}


@pytest.fixture
def limited(monkeypatch):
    """A loopback server of its own (its own budgets): a bucket of 8 requests refilled over 2 s (4 a second),
    50 ms a reply."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-rate")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-rate")
    with LoopbackLLMServer(latency=0.05, rpm=8, rate_window=2.0) as server:
        yield server


def spec_for(server: LoopbackLLMServer, vendor: str, *, budget: bool = True, model: str = "m") -> ProviderSpec:
    provider, options = VENDORS[vendor]
    url = server.anthropic_url if provider == "anthropic" else server.openai_url
    return ProviderSpec(provider, model, url, {**options, "rate_limit_budget": budget})


def threaded(target) -> threading.Thread:
    """A thread that gives its database connection back when it ends, as a worker's task does (the LLM config
    is read from the database; on PostgreSQL a thread that keeps its pooled connection drains the pool)."""

    def run() -> None:
        try:
            target()
        finally:
            connection.close()

    return threading.Thread(target=run)


def hammer(spec: ProviderSpec, *, threads: int, calls: int) -> list[str]:
    """`threads` workers making `calls` calls each at once; the failures' messages."""
    failures: list[str] = []

    def work() -> None:
        llm = get_llm("judge", override=spec)
        for _ in range(calls):
            try:
                llm.call(ASK)
            except ProviderError as exc:
                failures.append(str(exc))

    workers = [threaded(work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    return failures


def test_headers_read_as_the_vendors_write_them():
    assert [parse_duration(t) for t in ("1s", "6m0s", "20ms", "1h2m3.5s", "", "soon")] == [
        1.0,
        360.0,
        0.02,
        3723.5,
        None,
        None,
    ]
    assert parse_time("2026-01-02T03:04:05Z") == 1767323045.0 and parse_time("yesterday") is None
    openai = {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "29000",
        "x-ratelimit-reset-tokens": "2s",
    }
    assert read_headers(openai, 100.0) == {"requests": (500, 499, 100.12), "tokens": (30000, 29000, 102.0)}
    anthropic = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2026-01-02T03:04:05Z",
        "anthropic-ratelimit-tokens-limit": "90000",
        "anthropic-ratelimit-tokens-remaining": "1",
        "anthropic-ratelimit-tokens-reset": "2026-01-02T03:04:05Z",
        "anthropic-ratelimit-input-tokens-limit": "40000",
        "anthropic-ratelimit-input-tokens-remaining": "39000",
        "anthropic-ratelimit-input-tokens-reset": "2026-01-02T03:05:05Z",
    }
    # The prompt-token limit is the one the budget's estimate measures; the combined one only without it.
    assert read_headers(anthropic, 0.0) == {
        "requests": (50, 49, 1767323045.0),
        "tokens": (40000, 39000, 1767323105.0),
    }
    assert read_headers({}, 0.0) == {} and read_headers(None, 0.0) == {}
    assert [go_duration(s) for s in (0.25, 1.0, 59.2, 360.0, 3723.0)] == ["250ms", "1s", "1m0s", "6m0s", "1h2m3s"]


@pytest.mark.parametrize("vendor", list(VENDORS))
def test_threads_sharing_a_budget_meet_far_fewer_429s(limited, vendor):
    # Without the budget, 8 workers rush 32 calls into a bucket of 8 refilled at 4 a second and meet 429 after 429.
    hammer(spec_for(limited, vendor, budget=False, model="alone"), threads=8, calls=4)
    refused_alone = limited.rate_limited
    limited.reset()
    started = time.monotonic()
    failed_shared = hammer(spec_for(limited, vendor, model="shared"), threads=8, calls=4)
    took = time.monotonic() - started
    refused_shared = limited.rate_limited
    assert refused_alone >= 12, (refused_alone, refused_shared)
    # With it, only the first calls (sent before any answer showed the limit) can meet one.
    assert refused_shared * 4 <= refused_alone, (refused_shared, refused_alone)
    assert failed_shared == [] and limited.count() - refused_shared == 32
    # 32 calls: the bucket's 8, then 24 more at 4 a second: 6 s at least, and not much more.
    assert 5.9 <= took <= 20, took
    assert RateLimitBudget.objects.filter(label__contains="/shared at ").count() == 1
    row = RateLimitBudget.objects.get(label__contains="/shared at ")
    assert "sk-test" not in row.label and row.state["requests"]["limit"] == 8


def test_a_server_without_rate_limit_headers_is_never_budgeted(limited):
    limited.rpm = None  # no limits, no headers: as a local server
    hammer(spec_for(limited, "openai-chat", model="free"), threads=2, calls=3)
    assert limited.count() == 6 and not RateLimitBudget.objects.exists()


def test_retry_after_pauses_every_worker_on_the_budget(limited):
    limited.rpm = None
    arrivals: list[float] = []

    def timed(endpoint, body, n):
        arrivals.append(time.monotonic())
        return default_responder(endpoint, body, n)

    limited.responder = timed
    spec = spec_for(limited, "openai-chat", model="paused")
    limited.script(Reply(status=429, headers={"retry-after": "2"}))
    first = threaded(lambda: get_llm("judge", override=spec).call(ASK))
    first.start()
    deadline = time.monotonic() + 10
    while not RateLimitBudget.objects.filter(label__contains="/paused at ").exists():
        assert time.monotonic() < deadline, "the 429's Retry-After did not reach the shared budget"
        time.sleep(0.02)
    paused_at = time.monotonic()
    # Another worker (another role, the same key, URL and model) waits out the pause too.
    get_llm("gate", override=spec).call(ASK)
    first.join(10)
    assert len(arrivals) == 2 and min(arrivals) >= paused_at + 1.5, [a - paused_at for a in arrivals]
    # Without the shared budget the other worker would have gone at once.
    alone = spec_for(limited, "openai-chat", budget=False, model="paused")
    limited.script(Reply(status=429, headers={"retry-after": "2"}))
    started = time.monotonic()
    first = threaded(lambda: get_llm("judge", override=alone).call(ASK))
    first.start()
    time.sleep(0.3)
    get_llm("gate", override=alone).call(ASK)
    assert time.monotonic() - started < 1.5
    first.join(10)


WORKER = """
import os, threading
from evaluation.providers import Message, ProviderError, ProviderSpec, get_llm
spec = ProviderSpec("openai", "two", os.environ["LOOP_URL"], {"api": "chat", "rate_limit_budget": os.environ["BUDGET"] == "1"})
failed = []
def work():
    llm = get_llm("judge", override=spec)
    for _ in range(6):
        try:
            llm.call([Message("user", "2+2=4?")])
        except ProviderError as exc:
            failed.append(str(exc))
threads = [threading.Thread(target=work) for _ in range(3)]
[t.start() for t in threads]
[t.join() for t in threads]
print("FAILED", len(failed))
"""


def two_processes(server: LoopbackLLMServer, *, budget: bool, redis_url: str = "") -> list[str]:
    """Two worker processes, 3 threads x 6 calls each, against the server at once; their outputs."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "REDIS_URL": redis_url,
        "LOOP_URL": server.openai_url,
        "BUDGET": "1" if budget else "0",
        "EVAL_LLM_MAX_ATTEMPTS": "6",
    }
    command = [sys.executable, "manage.py", "shell", "-c", WORKER]
    procs = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        outputs.append(out.strip().splitlines()[-1])
    return outputs


@pytest.mark.parametrize("store", ["database", "redis"])
def test_two_processes_share_one_budget(limited, store, tmp_path):
    if store == "redis" and shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    # 6 requests refilled over 3 s: the server's token bucket gives back 2 a second, so 36 calls take at
    # least 15 s and two processes that do not share a budget keep meeting an empty bucket.
    limited.rpm, limited.rate_window = 6, 3.0
    two_processes(limited, budget=False)
    refused_alone = limited.rate_limited
    limited.reset()
    limited.rpm, limited.rate_window = 6, 3.0
    if store == "redis":
        with redis_server(tmp_path) as url:
            outputs = two_processes(limited, budget=True, redis_url=url)
            import redis

            keys = redis.Redis.from_url(url).keys("evaluation:ratelimit:*")
        assert len(keys) == 1 and not RateLimitBudget.objects.exists()
    else:
        outputs = two_processes(limited, budget=True)
        assert RateLimitBudget.objects.count() == 1
    refused_shared = limited.rate_limited
    assert outputs == ["FAILED 0", "FAILED 0"]
    assert limited.count() - refused_shared == 36
    # Each process's first calls go out before it has seen the limit; after that the budget holds them.
    assert refused_alone >= 12 and refused_shared * 3 <= refused_alone, (refused_shared, refused_alone)


@pytest.mark.parametrize(("value", "reason"), [("0", "must be 1 or more"), ("lots", "must be a whole number")])
def test_loopback_llm_refuses_a_limit_that_is_no_number(value, reason):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=f"--rpm.*{reason}"):
        call_command("loopback_llm", f"--rpm={value}")
