"""Screenshots of the app's main pages at 1400 px: the dashboard, a run's report, a comparison, a judge card, a
drift page with its baseline, a suite run whose cases called tools and the suite cards, from data built through
the app's own commands and services in a private data folder (tests/web/sitedata.py, which the site's crawl test
builds too).

    .venv/bin/python docs/screenshots/make.py            # writes docs/screenshots/*.png
    .venv/bin/python docs/screenshots/make.py --keep     # and keeps the data folder (printed) to look around

What it builds, with no key and no network (the offline provider, as bin/demo): every persona against the
reference tutor (run_evaluation), failed, cancelled, queued and live runs, a comparison group of three personas
with four runs each whose last two runs were judged by a second judge (the judge role's LLM config pointed at the
loopback LLM server, which answers as an OpenAI-compatible judge would), rex's drift baseline and a later drift
run, the shipped suites run once, and the MRBench-style example set imported, judged and read on its judge card.
Then it serves the app under uvicorn, signs in as a staff user in Chromium (Playwright) and saves each page as a
PNG, quantised with Pillow to stay small.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.browsers import ARGS  # noqa: E402
from tests.web.sitedata import PASSWORD  # noqa: E402

OUT = Path(__file__).resolve().parent
WIDTH, FIRST_SCREEN, TALLEST = 1400, 1000, 2600
"""The window's width, the height of the first screen, and the most of a full page kept."""
MAX_BYTES = 400_000
CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")
SHOTS = ("dashboard", "run-report", "comparison", "judge-card", "drift", "suite-run-tools", "suite-cards")


def shrink(path: Path) -> int:
    """Quantise the PNG to 256 colours (the pages are flat colours and text) where Pillow is installed (it is
    not one of the app's requirements: `pip install pillow`); returns its size in bytes."""
    try:
        from PIL import Image
    except ImportError:
        return path.stat().st_size
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)
    return path.stat().st_size


def shoot(base: str, pages: dict[str, str]) -> list[tuple[str, int, int]]:
    """Each page at 1400 px wide: the whole page up to TALLEST px, or only the first screen when that is too big."""
    from playwright.sync_api import sync_playwright

    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_context(viewport={"width": WIDTH, "height": FIRST_SCREEN}).new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/admin/login/?next=/admin/evaluation/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(f"{base}/admin/evaluation/")
        for name, path in pages.items():
            page.goto(f"{base}{path}")
            try:
                page.wait_for_load_state("networkidle", timeout=10_000)
            except Exception:  # noqa: BLE001 - a live page polls every 2 s: shot as it is
                pass
            if name == "suite-run-tools":  # its transcript, with the tool call, open
                page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
            target = OUT / f"{name}.png"
            height = min(TALLEST, page.evaluate("document.documentElement.scrollHeight"))
            page.screenshot(path=str(target), full_page=True, clip={"x": 0, "y": 0, "width": WIDTH, "height": height})
            size = shrink(target)
            if size > MAX_BYTES:
                height = FIRST_SCREEN
                page.screenshot(path=str(target), clip={"x": 0, "y": 0, "width": WIDTH, "height": height})
                size = shrink(target)
            shots.append((name, height, size))
        browser.close()
    return shots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="Keep the data folder (its path is printed)")
    parser.add_argument("--data", type=Path, help="A folder built before by `python -m tests.web.sitedata DIR`")
    args = parser.parse_args()
    if args.data:
        data_dir, args.keep = args.data.resolve(), True
        pages = json.loads((data_dir / "pages.json").read_text())
    else:
        data_dir = Path(tempfile.mkdtemp(prefix="eval-screenshots-"))
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "EVAL_SERVER_URL")}
        built = subprocess.run(
            [sys.executable, "-m", "tests.web.sitedata", str(data_dir)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if built.returncode:
            sys.exit(f"building the data failed:\n{built.stderr[-3000:]}")
        pages = json.loads(built.stdout.strip().splitlines()[-1])
        os.kill(pages["tutor_pid"], signal.SIGTERM)  # the live run's silent tutor (tests/web/sitedata.py, live)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "evalproject.settings",
            "EVAL_DATA_DIR": str(data_dir),
            "EVAL_RUNS_DIR": str(data_dir / "runs"),
            "EVAL_RUN_STALE_AFTER": "86400",  # the live run stays running while it is photographed
        }
    )
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    from evaluation.tutoring.server import ServerProcess

    server = ServerProcess({}, log_path=data_dir / "web.log").start()
    try:
        url = server.wait(600)  # a busy machine can take minutes to start it
        for name, height, size in shoot(url, {name: pages[name] for name in SHOTS}):
            print(f"{OUT / name}.png: {WIDTH}x{height}, {size // 1000} KB")
    finally:
        server.stop()
        if args.keep:
            print(f"data kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
