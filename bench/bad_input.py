"""How fast bad input is refused: each case of issues #12 and #37, its status and the time to the answer.

python bench/bad_input.py [--repeats 20]

HTTP cases go to a real uvicorn process on a fresh SQLite database (the API with a staff token, the
session protocol with the protocol key, a report's live feed with a staff session), sent with httpx
from this process; each time is from the request's first byte to the whole answer, on loopback.
File cases (a catalogue file, an EVAL.md) call the loaders in this process, as `manage.py
load_catalog` and the suite discovery do. Each line: the expected status (or error), what came back,
and the median (min-max) of --repeats after one warm-up that is not counted. The goal is under 100 ms.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _django import ROOT
from _harness import spread, web_processes
from api_load import seed

TEN_MB = b'[{"agent": "' + b"x" * 10_000_000 + b'"}]'
DEEP = b"[" * 100_000 + b"]" * 100_000
BAD_UTF8 = b'{"topic_id": "comparing-decimals", "student": "caf\xe9"}'
ALIAS_BOMB = "\n".join(
    ["dimension: fluency", "agent_id: _default", "propositions: [{id: p1, claim: 'Speaks well.'}]", "a0: &a0 lol"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
)


LONG = "7" * 5000
SURROGATES = ('{"topic_id": "comparing-decimals", "user": "' + "\\udfff" * 300_000 + '"}').encode()  # 1.8 MB
LONG_ANNOTATOR = ("# annotator: " + "a" * 200 + "\nTutor: hi\nStudent: 5\n").encode()


def timed(call: Callable[[], str], repeats: int) -> tuple[str, list[float]]:
    outcome = call()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        outcome = call()
        times.append((time.perf_counter() - started) * 1000)
    return outcome, times


def http_cases(url: str, token: str, session_key: str, protocol_key: str) -> list[tuple[str, str, Callable[[], str]]]:
    import httpx

    client = httpx.Client(base_url=url, timeout=30)
    api = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    protocol = {"Authorization": f"Bearer {protocol_key}", "Content-Type": "application/json"}

    def post(path: str, body: bytes, headers: dict[str, str]) -> Callable[[], str]:
        return lambda: str(client.post(path, content=body, headers=headers).status_code)

    live = "/admin/evaluation/runs/active_0/live.json?after=abc"
    return [
        ("API: a 10 MB JSON body", "413", post("/api/drift/messages", TEN_MB, api)),
        ("session protocol: a 10 MB JSON body", "413", post("/sessions", TEN_MB, protocol)),
        ("API: 100,000 nested brackets", "400", post("/api/evaluation/start", DEEP, api)),
        ("drift ingest: 100,000 nested brackets", "400", post("/api/drift/messages", DEEP, api)),
        ("session protocol: 100,000 nested brackets", "400", post("/sessions", DEEP, protocol)),
        ("session protocol: invalid UTF-8", "400", post("/sessions", BAD_UTF8, protocol)),
        ("drift ingest: invalid UTF-8", "400", post("/api/drift/messages", BAD_UTF8, api)),
        (
            "session protocol: a 5,000-digit integer",
            "400",
            post("/sessions", f'{{"topic_id": "x", "seed": {LONG}}}'.encode(), protocol),
        ),
        (
            "drift ingest: a 5,000-digit integer",
            "400",
            post("/api/drift/messages", f'[{{"agent": {LONG}}}]'.encode(), api),
        ),
        (
            "transcript import: a 5,000-digit integer",
            "400",
            post("/api/judging/import", f'[{{"id": {LONG}}}]'.encode(), api),
        ),
        ("API: a 5,000-digit integer", "400", post("/api/evaluation/start", f'{{"seed": {LONG}}}'.encode(), api)),
        ("session protocol: a lone surrogate", "400", post("/sessions", b'{"topic_id": "\\udfff"}', protocol)),
        ("session protocol: 300,000 lone surrogates", "400", post("/sessions", SURROGATES, protocol)),
        ("transcript import: a lone surrogate", "400", post("/api/judging/import", b'[{"id": "\\udfff"}]', api)),
        (
            "transcript import: a 200-char annotator",
            "400",
            post("/api/judging/import?input_format=text", LONG_ANNOTATOR, api),
        ),
        (
            "API: original_text 0 (a number)",
            "400",
            post("/api/drift/agents/x/gate", b'{"text": "t", "channel": "c", "original_text": 0}', api),
        ),
        (
            "dashboard: date_to=2026-13-45",
            "400",
            lambda: str(
                client.get(
                    "/admin/evaluation/?date_to=2026-13-45", headers={"Cookie": f"sessionid={session_key}"}
                ).status_code
            ),
        ),
        (
            "live feed: after=abc",
            "400",
            lambda: str(client.get(live, headers={"Cookie": f"sessionid={session_key}"}).status_code),
        ),
    ]


def file_cases(folder: Path) -> list[tuple[str, str, Callable[[], str]]]:
    from evaluation.catalog import catalog_load
    from evaluation.suites.parser import SuiteError, load_file

    big = folder / "personas"
    big.mkdir()
    (big / "big.json").write_text(json.dumps({"persona_id": "big", "name": "Big", "description": "x" * 50_000_000}))
    bomb = folder / "propositions" / "fluency"
    bomb.mkdir(parents=True)
    (bomb / "_default.yaml").write_text(ALIAS_BOMB)
    suite = folder / "suite"
    suite.mkdir()
    (suite / "EVAL.md").write_text(
        "".join(f"## case {i}\n### Prompt\nHi {i}\n### Expect\nA greeting\n\n" for i in range(100_000))
    )

    def load(**dirs: Path) -> Callable[[], str]:
        def call() -> str:
            options = {"personas_dir": None, "topics_dir": None, "propositions_dir": None, **dirs}
            errors = catalog_load(**options).errors
            return "refused" if errors else "loaded"

        return call

    def suite_file() -> str:
        try:
            load_file(suite / "EVAL.md")
        except SuiteError:
            return "refused"
        return "loaded"

    return [
        ("catalogue: a 50 MB persona file", "refused", load(personas_dir=big)),
        ("catalogue: a YAML alias bomb", "refused", load(propositions_dir=folder / "propositions")),
        ("EVAL.md: 100,000 cases (5.0 MB)", "refused", suite_file),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="eval-bench-bad-input-"))
    os.environ["EVAL_DATA_DIR"] = str(folder)
    os.environ["DATABASE_URL"] = f"sqlite:///{folder}/db.sqlite3"
    try:
        token, session_key, _ = seed(20)
        from django.conf import settings

        settings.EVALUATION["SUITE_DIRS"] = [folder / "suite"]
        env = {"DATABASE_URL": os.environ["DATABASE_URL"], "EVAL_TUTOR_PROVIDER": "offline"}
        failed = False
        with web_processes(env, 1, folder / "uvicorn.log") as (url, _):
            cases = http_cases(url, token, session_key, settings.EVALUATION["PROTOCOL_KEY"]) + file_cases(folder)
            print(f"{'case':<44} {'expected':>8} {'got':>8}   ms: median (min-max) of {args.repeats}")
            for name, expected, call in cases:
                got, times = timed(call, args.repeats)
                failed |= got != expected
                print(f"{name:<44} {expected:>8} {got:>8}   {spread(times, '{:.1f}')}")
        if failed:
            sys.exit("a case did not get the expected answer")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
