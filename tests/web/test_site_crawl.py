"""Every page the site links to, with data of every kind, as a superuser and as a viewer, in Chromium at 1400 px.

The data is built once by the app's own commands and services in a private SQLite folder (tests/web/sitedata.py:
tutoring runs completed, failed, cancelled, queued and live; a comparison judged by two judges; drift runs with and
without a baseline; suites with tool-calling cases; imported transcripts with people's labels; judging jobs and a
provider batch), served by uvicorn. From the admin index and the dashboard, each role follows every same-site link
(changelists, their filters and pages, change pages, history, reports, comparisons, cards, the API's pages), with a
few pages at a time in one browser, and every page must answer below 500 (and below 400: a link to a page its user
cannot open is a broken link), log no console error, fail no request, be no wider than the window and cut no
heading, card title or table header mid-word (clipped, or a word broken over two lines).

Built from its own data, not the test database, it runs once: on the SQLite pass of CI, skipped on PostgreSQL.
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from evaluation.tutoring.server import ServerProcess
from tests.browsers import ARGS, CHROMIUM
from tests.web.sitedata import PASSWORD, ROOT

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)"),
    pytest.mark.skipif(
        os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the crawl builds and serves data of its own on SQLite: it runs once, on the SQLite pass",
    ),
]
playwright_api = pytest.importorskip("playwright.async_api", reason="playwright is installed by .ci/run")

ARTIFACTS = ROOT / "test-artifacts"
WIDTH, HEIGHT = 1400, 900
TABS = 3
"""Pages open at once per role."""
PAGE_SECONDS = 90
"""The most one page may take (load, checks): past it, the page is reported and the crawl goes on."""
PER_MODEL = 2
"""Change pages followed per admin model (and as many history and delete pages): the pages of interest (a run
of every kind, ...) are crawled from the dashboard's links whatever this says, and more rows of the same
template find nothing new for the minutes they take (at 4 a model, the crawl took 10 minutes on 2 busy cores)."""
LIST_PAGES = 2
"""Pages of a changelist followed (?p=1 and ?p=2): the 27 further pages of judge scores are the same template over
rows of the same kind, and took a minute of the crawl."""
FILTER_VALUES = 2
"""Values followed per filter of a list (status=completed and status=failed, not every status): each filter's
code runs on two values, and the further values, half the pages the crawl opened, are the same template over
the same query with another argument (they took 200 of the crawl's 500 s at load 10 on 2 cores)."""
SUBSET_LISTS = {"/admin/evaluation/completedrun/", "/admin/evaluation/failedrun/"}
"""Lists of some evaluation runs with the evaluation runs' 38 filters: each list is crawled, its filters once, on
the evaluation runs' list."""
SKIPPED_PARAMS = {"o", "_changelist_filters", "_popup", "_to_field"}
"""Query parameters that only sort a list or carry the list's filters along: one page per filter is enough."""
SCROLLING_BY_DESIGN = {"/api/redoc/"}
"""Third-party pages whose inner boxes scroll by design (ReDoc's request and response samples are code panels
that scroll sideways): their boxes are not checked; their width, console and requests are."""
NOT_FOLLOWED = ("/admin/logout/", "/static/", "/api/schema/")
"""Logging out would end the crawl; static files are checked as each page loads them; the schema is a file."""

CHECKS = r"""
() => {
  const width = window.innerWidth;
  const wide = document.documentElement.scrollWidth;
  const boxes = [];
  for (const el of document.querySelectorAll('body *')) {
    const style = getComputedStyle(el);
    if (!['auto', 'scroll'].includes(style.overflowX)) continue;
    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0)
      boxes.push(`${el.tagName.toLowerCase()}.${el.className}: ${el.scrollWidth}px in ${el.clientWidth}px`);
  }
  const cut = [];
  const selector = 'h1, h2, h3, th, .card-head, .card .meta, .card-foot, caption, legend';
  for (const el of document.querySelectorAll(selector)) {
    if (!el.getClientRects().length) continue;
    const style = getComputedStyle(el);
    const text = el.innerText.trim().replace(/\s+/g, ' ');
    if (!text) continue;
    if (style.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1) {
      cut.push(`clipped: ${text.slice(0, 80)}`);
      continue;
    }
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const words = /[^\s\/\-\u2010-\u2015\u00b7,]{2,}/g;
      let m;
      while ((m = words.exec(node.textContent))) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) cut.push(`broken word "${m[0]}" in: ${text.slice(0, 80)}`);
      }
    }
  }
  const links = [...document.querySelectorAll('a[href]')].map(a => [a.href, a.hasAttribute('download')]);
  return {wide: wide > width ? wide : 0, boxes, cut, links};
}
"""


@dataclass
class Visit:
    url: str
    status: int = 0
    kind: str = ""
    console: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    wide: int = 0
    boxes: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)


@dataclass
class Crawl:
    role: str
    visits: dict[str, Visit] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    """Links to downloads (CSV, JSON, report files): their status, fetched, not opened as pages."""
    left_out: Counter = field(default_factory=Counter)
    """Change pages not followed past PER_MODEL, per admin model; filter values past FILTER_VALUES, per list."""


def normalised(url: str, base: str) -> str | None:
    """The page a link leads to, as the crawl keys it; None for a link it does not follow."""
    parts = urlsplit(url)
    if f"{parts.scheme}://{parts.netloc}" != base or parts.scheme not in ("http", "https"):
        return None
    if any(parts.path.startswith(p) for p in NOT_FOLLOWED):
        return None
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(k in ("_popup", "_to_field") for k, _ in query):
        return None
    kept = [(k, v) for k, v in query if k not in SKIPPED_PARAMS]
    if any(k == "p" and v.isdigit() and int(v) > LIST_PAGES for k, v in kept):
        return None
    if parts.path in SUBSET_LISTS and kept:
        return None  # the evaluation runs' own filters, over fewer of the same rows: followed on that list
    if parts.path.startswith("/admin/") and parts.path.count("/") == 4 and len(kept) > 1:
        return None  # a changelist's filters one at a time: each filtered list links every other filter too
    return urlunsplit(("", "", parts.path, urlencode(sorted(kept)), ""))


def filter_of(key: str) -> tuple[str, ...] | None:
    """The list and the filter of a filtered page ("/admin/evaluation/evaluationrun/?status__exact=failed" ->
    ("/admin/evaluation/evaluationrun/", "status__exact")); None for a page with no query."""
    path, _, query = key.partition("?")
    return (path, *sorted(name for name, _ in parse_qsl(query, keep_blank_values=True))) if query else None


def model_of(path: str) -> str | None:
    """The admin model and kind of a change, history or delete page
    ("/admin/evaluation/evaluationrun/12/change/" -> "evaluation/evaluationrun/change")."""
    bits = path.strip("/").split("/")
    if len(bits) >= 5 and bits[0] == "admin" and bits[3] != "add" and bits[-1] in ("change", "history", "delete"):
        return "/".join([*bits[1:3], bits[-1]])
    return None


async def crawl_as(browser, base: str, username: str, starts: list[str]) -> Crawl:
    context = await browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    context.set_default_timeout(60_000)
    page = await context.new_page()
    await page.goto(f"{base}/admin/login/?next=/admin/")
    await page.fill("#id_username", username)
    await page.fill("#id_password", PASSWORD)
    await page.click("input[type=submit]")
    await page.wait_for_url(f"{base}/admin/")
    await page.close()

    result = Crawl(username)
    queue: asyncio.Queue[str] = asyncio.Queue()
    seen: set[str] = set()
    per_model: Counter = Counter()

    def offer(url: str, download: bool = False) -> None:
        key = normalised(url, base)
        if key is None or key in seen:
            return
        download = download or "/files/" in key  # a run's report files: fetched, not opened as pages
        model = model_of(urlsplit(key).path)
        if model is not None:
            if per_model[model] >= PER_MODEL:
                result.left_out[model.rsplit("/", 1)[0]] += 1
                return
            per_model[model] += 1
        filtered = filter_of(key)
        if filtered is not None:
            if per_model[filtered] >= FILTER_VALUES:
                result.left_out[f"{filtered[0]} {'&'.join(filtered[1:])}"] += 1
                return
            per_model[filtered] += 1
        seen.add(key)
        if download:
            result.files[key] = -1
        else:
            queue.put_nowait(key)

    async def fetch_file(key: str) -> None:
        response = await context.request.get(base + key)
        result.files[key] = response.status
        await response.dispose()

    async def visit(tab, key: str) -> None:
        seen_here = Visit(key)
        result.visits[key] = seen_here
        leaving = {"now": False}

        def on_console(message) -> None:
            if message.type == "error":
                seen_here.console.append(message.text)

        def on_failed(request) -> None:
            failure = request.failure or ""
            if leaving["now"] and "ERR_ABORTED" in failure:
                return  # cut short as the tab leaves the page (its polling, a favicon still loading)
            seen_here.failed.append(f"{request.method} {request.url}: {failure}")

        def on_response(response) -> None:
            if response.status >= 400 and response.request.resource_type != "document":
                seen_here.failed.append(f"{response.request.method} {response.url}: {response.status}")

        tab.on("console", on_console)
        tab.on("pageerror", lambda error: seen_here.console.append(f"uncaught: {error}"))
        tab.on("requestfailed", on_failed)
        tab.on("response", on_response)
        try:
            response = await tab.goto(base + key, wait_until="load")
            assert response is not None
            seen_here.status = response.status
            seen_here.kind = (response.headers.get("content-type") or "").split(";")[0]
            if seen_here.kind == "text/html":
                try:
                    await tab.wait_for_load_state("networkidle", timeout=5_000)
                except playwright_api.TimeoutError:
                    pass  # a live page polls every 2 s and may never be idle for 500 ms: checked as it is
                found = await tab.evaluate(CHECKS)
                seen_here.wide, seen_here.boxes, seen_here.cut = found["wide"], found["boxes"], found["cut"]
                if urlsplit(key).path in SCROLLING_BY_DESIGN:
                    seen_here.boxes = []
                for href, download in found["links"]:
                    offer(href, download)
        except playwright_api.Error as exc:
            if "Download is starting" in str(exc):
                result.visits.pop(key)
                result.files[key] = -1
                await fetch_file(key)
            else:
                seen_here.failed.append(f"navigation: {str(exc).splitlines()[0]}")
        finally:
            leaving["now"] = True
            try:  # the page's polling ends here, seen as this page's, not as a failure of the next one
                await tab.goto("about:blank")
            except playwright_api.Error:
                pass
            for name, handler in (("console", on_console), ("requestfailed", on_failed), ("response", on_response)):
                tab.remove_listener(name, handler)

    async def worker() -> None:
        tab = await context.new_page()
        while True:
            key = await queue.get()
            try:
                await asyncio.wait_for(visit(tab, key), PAGE_SECONDS)
            except Exception as exc:  # noqa: BLE001 - recorded against the page; the crawl goes on
                result.visits.setdefault(key, Visit(key)).failed.append(f"crawl: {type(exc).__name__}: {exc}"[:300])
                await tab.close()
                tab = await context.new_page()
            finally:
                queue.task_done()
                if len(result.visits) % 100 == 0:
                    waiting = Counter("/".join(k.split("?")[0].split("/")[:5]) for k in queue._queue)  # type: ignore[attr-defined]
                    print(f"{username}: {len(result.visits)} pages, waiting: {waiting.most_common(6)}", file=sys.stderr)

    for start in starts:
        offer(base + start)
    workers = [asyncio.create_task(worker()) for _ in range(TABS)]
    await queue.join()
    for task in workers:
        task.cancel()
    for key in [k for k, status in result.files.items() if status == -1]:
        await fetch_file(key)
    await context.close()
    return result


async def crawl_site(base: str, starts: list[str]) -> dict[str, Crawl]:
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            staff, viewer = await asyncio.gather(
                crawl_as(browser, base, "staff", starts), crawl_as(browser, base, "viewer", starts)
            )
        finally:
            await browser.close()
    return {"staff": staff, "viewer": viewer}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory) -> dict[str, Crawl]:
    """The site's data built once, served, and crawled by both roles; the figures printed for the log."""
    began = time.monotonic()
    if os.environ.get("EVAL_SITE_DATA"):  # a folder built before by `python -m tests.web.sitedata DIR`, to look again
        data = Path(os.environ["EVAL_SITE_DATA"])
        pages = json.loads((data / "pages.json").read_text())
    else:
        data = tmp_path_factory.mktemp("site")
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "EVAL_SERVER_URL")}
        built = subprocess.run(
            [sys.executable, "-m", "tests.web.sitedata", str(data)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert built.returncode == 0, built.stderr[-4000:]
        pages = json.loads(built.stdout.strip().splitlines()[-1])
        try:
            os.kill(pages["tutor_pid"], signal.SIGTERM)  # the live run's silent tutor (see sitedata.live)
        except ProcessLookupError:
            pass
    data_seconds = time.monotonic() - began
    server_env = {
        "EVAL_DATA_DIR": str(data),
        "EVAL_RUNS_DIR": str(data / "runs"),
        "EVAL_RUN_STALE_AFTER": "86400",  # the live run stays running while the crawl looks at it
    }
    with pytest.MonkeyPatch.context() as mp:
        for name in ("DATABASE_URL", "REDIS_URL", "EVAL_SERVER_URL"):
            mp.delenv(name, raising=False)
        server = ServerProcess(server_env, log_path=data / "web.log").start()
        try:
            base = server.wait(600)  # a busy machine can take minutes to start it
            began_crawl = time.monotonic()
            starts = ["/admin/", "/admin/evaluation/"] + [v for k, v in pages.items() if isinstance(v, str)]
            result = asyncio.run(crawl_site(base, starts))
            crawl_seconds = time.monotonic() - began_crawl
        finally:
            server.stop()
    for role, crawl in result.items():
        print(
            f"\ncrawl as {role}: {len(crawl.visits)} pages, {len(crawl.files)} files, "
            f"{sum(v.status >= 500 for v in crawl.visits.values())} x 5xx, "
            f"{sum(len(v.console) for v in crawl.visits.values())} console errors, "
            f"{sum(bool(v.wide or v.boxes) for v in crawl.visits.values())} overflowing pages; "
            f"left out past {PER_MODEL} objects a model or {FILTER_VALUES} values a filter: "
            f"{sum(crawl.left_out.values())} ({dict(crawl.left_out.most_common(5))} ...)"
        )
    print(f"site data built in {data_seconds:.0f} s, crawled in {crawl_seconds:.0f} s")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "site_crawl.json").write_text(
        json.dumps({role: {k: v.__dict__ for k, v in c.visits.items()} for role, c in result.items()}, indent=1)
    )
    return result


def problems(crawled: dict[str, Crawl], what) -> list[str]:
    return [f"{role} {key}: {p}" for role, c in crawled.items() for key, v in c.visits.items() for p in what(v)]


def reached_every_kind_of_page(crawled: dict[str, Crawl]) -> list[str]:
    missing = []
    for role, crawl in crawled.items():
        paths = list(crawl.visits)
        for part in (
            "/admin/evaluation/runs/",
            "/admin/evaluation/comparisons/",
            "/admin/evaluation/suites/runs/",
            "/admin/evaluation/drift/rex/",
            "/admin/evaluation/judging/",
            "/api/docs/",
            "/api/redoc/",
        ):
            if not any(p.startswith(part) for p in paths):
                missing.append(f"{role}: no page under {part}")
        if not any("status__exact=" in p for p in paths):
            missing.append(f"{role}: no changelist filter followed")
    if not len(crawled["staff"].visits) > len(crawled["viewer"].visits) > 50:
        missing.append(f"pages: staff {len(crawled['staff'].visits)}, viewer {len(crawled['viewer'].visits)}")
    return missing


def test_every_page_of_both_roles_is_whole(crawled):
    """The five checks of one crawl in one test: split over tests, pytest-xdist's workers would each crawl the
    site again (the crawl is a module fixture, and a worker's modules are its own)."""
    found = {
        "both roles reach every kind of page": reached_every_kind_of_page(crawled),
        "no page answers an error": problems(crawled, lambda v: [v.status] if v.status >= 400 else [])
        + [f"{role} {key}: {s}" for role, c in crawled.items() for key, s in c.files.items() if s >= 400],
        "no console error and no failed request": problems(crawled, lambda v: v.console + v.failed),
        "no page is wider than the window or hides columns in a scroll box": problems(
            crawled, lambda v: ([f"{v.wide}px wide"] if v.wide else []) + v.boxes
        ),
        "no heading, card or table header is cut mid-word": problems(crawled, lambda v: v.cut),
    }
    assert {check: seen for check, seen in found.items() if seen} == {}
