"""Screenshots of the app's main pages at 1400 px: the dashboard, a run's report, a comparison, a judge card and
a drift page, from data built through the app's own commands and services in a private data folder.

    .venv/bin/python docs/screenshots/make.py            # writes docs/screenshots/*.png
    .venv/bin/python docs/screenshots/make.py --keep     # and keeps the data folder (printed) to look around

What it builds, with no key and no network (the offline provider, as bin/demo): every persona against the
reference tutor (run_evaluation), a comparison group of three personas with four runs each whose last two runs
were judged by a second judge (the judge role's LLM config pointed at the loopback LLM server, which answers as
an OpenAI-compatible judge would), rex's drift baseline and a later drift run
(drift_baseline, drift_run with the offline judge), and the MRBench-style example
set imported, judged three times and read on its judge card. Then it serves the app under uvicorn, signs in as
a staff user in Chromium (Playwright) and saves each page as a PNG, quantised with Pillow to stay small.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
WIDTH, FIRST_SCREEN, TALLEST = 1400, 1000, 2600
"""The window's width, the height of the first screen, and the most of a full page kept."""
MAX_BYTES = 400_000
CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "screenshots-pass-123"
SECOND_JUDGE = "gpt-4.1-judge"


def prepare_environment(data_dir: Path) -> None:
    """The embedded default (SQLite, ORM broker, in-memory layer) in a folder of its own, whatever the shell says."""
    for name in ("DATABASE_URL", "REDIS_URL", "EVAL_SERVER_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        os.environ.pop(name, None)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "evalproject.settings",
            "EVAL_DATA_DIR": str(data_dir),
            "EVAL_RUNS_DIR": str(data_dir / "runs"),
            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
            "DJANGO_ALLOW_ASYNC_UNSAFE": "true",  # Playwright's sync API runs an event loop in this process
        }
    )
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import django

    django.setup()


def second_judge(endpoint: str, body: dict, n: int):
    """An OpenAI-compatible judge that is stricter than the offline rules: scores from the conversation's hash,
    two to four points lower, and one problem quoting the tutor's first line."""
    from evaluation.providers.loopback import Reply, example_for, requested_schema

    schema = requested_schema(endpoint, body)
    if schema is None:
        return Reply(text=f"Reply {n}.")
    answer = example_for(schema)
    prompt = json.dumps(body.get("messages") or body.get("input") or "")
    digest = hashlib.sha256(prompt.encode()).digest()
    dims = list(answer.get("scores", {}))
    answer["scores"] = {d: 3 + digest[i] % 4 for i, d in enumerate(dims)}
    answer["dimension_analysis"] = {
        d: f"Scored {answer['scores'][d]}/10: the tutor's turns read as scripted for this student." for d in dims
    }
    tutor_line = ""
    for line in prompt.replace("\\n", "\n").splitlines():
        if "] TUTOR: " in line:
            tutor_line = line.split("] TUTOR: ", 1)[1][:60].rsplit(" ", 1)[0]
            break
    answer["problems"] = [
        {
            "title": "Moves on before the student shows understanding",
            "turns": [1],
            "description": "The tutor asks the next question without checking the student's answer.",
            "quote": tutor_line,
            "severity": "major",
            "root_cause": "wrong_pacing",
        }
    ]
    answer["summary"] = "A second judge, stricter on pacing and attunement than the offline rules."
    return Reply(json=answer)


def build(server_url: str, data_dir: Path) -> dict[str, str]:
    """The data the pages show; returns each page's path."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from evaluation import tasks
    from evaluation.models import EvaluationRun, JudgeConfiguration, LLMConfig, Topic
    from evaluation.providers.loopback import LoopbackLLMServer
    from evaluation.tutoring import services

    settings.EVALUATION["SERVER_URL"] = server_url  # where the runs' worker finds the reference tutor
    call_command("createsuperuser", interactive=False, username="staff", email="staff@example.com", verbosity=0)
    assert get_user_model().objects.filter(username="staff").exists()
    topic = Topic.objects.get(topic_id="comparing-decimals")
    # every persona, as bin/demo runs them
    call_command(
        "run_evaluation",
        persona="all",
        topic_id=topic.topic_id,
        provider="offline",
        max_turns=8,
        seed=42,
        workers=2,
        server_url=server_url,
    )
    lowest = EvaluationRun.objects.exclude(overall_score=None).order_by("overall_score", "run_id").first()

    # a comparison group whose runs were judged by two judges: the judge role's config changed between runs
    runs = services.run_start(
        topic_id=topic.topic_id,
        persona=["ace", "struggler", "simplicity_seeker"],
        runs_per_persona=4,
        max_turns=8,
        seed=7,
        enqueue=False,
        started_by="dashboard",
    )
    group = runs[0].group
    with LoopbackLLMServer(responder=second_judge) as judge:
        for repeat_judged_by_second in (False, True):
            if repeat_judged_by_second:
                LLMConfig.objects.update_or_create(
                    role="judge",
                    defaults={"provider": "openai", "model": SECOND_JUDGE, "base_url": judge.openai_url},
                )
            for run in runs:
                if (run.repeat_index > 2) == repeat_judged_by_second:
                    tasks.run_task(run.pk, run.attempt)
        LLMConfig.objects.filter(role="judge").delete()
    judges = set(EvaluationRun.objects.filter(group=group).values_list("judge_label", flat=True))
    assert len(judges) == 2, f"the comparison group should carry two judges, it has {judges}"

    # rex's baseline (kept in the data folder, not the checkout's baselines/), then the run the page compares with it
    call_command("drift_baseline", agents="rex", judge="offline", baselines=data_dir / "baselines")
    call_command("drift_run", mode="live", judge="offline", agents="rex,ivy")
    call_command("import_transcripts", str(ROOT / "examples" / "judging" / "tutor-responses.json"))
    call_command("judge_imported", rubric="tutor-response", provider="offline", repeats=3)
    card = JudgeConfiguration.objects.order_by("pk").first()
    assert card is not None, "judge_imported made no judge configuration"
    return {
        "dashboard": "/admin/evaluation/",
        "run-report": f"/admin/evaluation/runs/{lowest.run_id}/",
        "comparison": f"/admin/evaluation/comparisons/{group}/",
        "judge-card": f"/admin/evaluation/judging/{card.pk}/",
        "drift": "/admin/evaluation/drift/rex/",
    }


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
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_context(viewport={"width": WIDTH, "height": FIRST_SCREEN}).new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/admin/login/?next=/admin/evaluation/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(f"{base}/admin/evaluation/")
        for name, path in pages.items():
            page.goto(f"{base}{path}")
            page.wait_for_load_state("networkidle")
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
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="eval-screenshots-"))
    prepare_environment(data_dir)
    from django.core.management import call_command

    from evaluation.tutoring import services

    call_command("migrate", interactive=False, verbosity=0)
    call_command("load_catalog", verbosity=0)
    server = services.ServerProcess(services.own_server_env(), log_path=data_dir / "server.log").start()
    try:
        url = server.wait(120)
        pages = build(url, data_dir)
        for name, height, size in shoot(url, pages):
            print(f"{OUT / name}.png: {WIDTH}x{height}, {size // 1000} KB")
    finally:
        server.stop()
        if args.keep:
            print(f"data kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
