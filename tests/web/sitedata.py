"""Data of every kind a user meets, built through the app's own commands and services in a private data folder
(SQLite, the offline provider, no key, no network): what the site crawl walks over and the screenshots show.

    python -m tests.web.sitedata DATA_DIR     # builds it, prints the pages of interest as JSON on the last line

The JSON's `tutor_pid` is the silent tutor's process, left running (see `live`): the caller stops it.

Tutoring runs completed (every persona, run_evaluation), failed (a tutor server that is down), cancelled,
queued and live (a run whose worker stopped at turn 2 while its tutor was silent: its heartbeat is recent, so
it reads as running to a server told to wait long before calling it stale); a comparison group of three personas
whose later runs were judged by a second judge (the judge role's LLM config pointed at the loopback LLM
server); rex's drift baseline (drift_baseline) and a drift run of rex and ivy (ivy has no baseline); the
shipped suites discovered and run, tool-calling cases included; the MRBench-style example set imported with its
people's labels, judged three times (a judging job) and once more through the offline batch (a provider batch).
"""

import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "site-data-pass-123"
USERS = {"staff": "superuser", "viewer": "the viewer group"}
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
            "DJANGO_ALLOW_ASYNC_UNSAFE": "true",  # Playwright's sync API runs an event loop in the screenshots' process
        }
    )
    if str(ROOT) not in sys.path:
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


def users() -> None:
    """A superuser (createsuperuser --noinput, as the README does) and a staff user in the viewer group."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    call_command("createsuperuser", interactive=False, username="staff", email="staff@example.com", verbosity=0)
    viewer = get_user_model().objects.create_user("viewer", "viewer@example.com", PASSWORD, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))


def tutoring(server_url: str, topic_id: str) -> dict[str, str]:
    """Completed runs of every persona, a failed run, a cancelled one and a queued one."""
    from django.core.management import CommandError, call_command

    from evaluation.models import EvaluationRun
    from evaluation.runs import services as run_services
    from evaluation.tutoring import services
    from evaluation.tutoring.server import free_port

    quiet = open(os.devnull, "w")  # noqa: SIM115 - the commands' progress, not wanted here
    call_command(
        "run_evaluation",
        persona="all",
        topic_id=topic_id,
        provider="offline",
        max_turns=6,
        seed=42,
        workers=2,
        server_url=server_url,
        stdout=quiet,
    )
    lowest = EvaluationRun.objects.exclude(overall_score=None).order_by("overall_score", "run_id").first()
    assert lowest is not None
    # a tutor server that is down: the run ends failed, with its reason
    try:
        call_command(
            "run_evaluation",
            persona="ace",
            topic_id=topic_id,
            provider="offline",
            max_turns=4,
            server_url=f"http://127.0.0.1:{free_port()}",
            stdout=quiet,
            stderr=quiet,
        )
    except CommandError:
        pass  # "1 run(s) failed: ... tutor unreachable": the run is stored failed, with that reason
    failed = EvaluationRun.objects.get(status="failed", kind="tutor")
    cancelled = services.run_start(topic_id=topic_id, persona="quiet_one", max_turns=6, enqueue=False)[0]
    run_services.run_cancel(cancelled)
    queued = services.run_start(topic_id=topic_id, persona="struggler", max_turns=6, enqueue=False)[0]
    return {"report": lowest.run_id, "failed": failed.run_id, "cancelled": cancelled.run_id, "queued": queued.run_id}


def comparison(topic_id: str) -> str:
    """A comparison group whose runs were judged by two judges: the judge role's config changed between runs."""
    from evaluation import tasks
    from evaluation.models import EvaluationRun, LLMConfig
    from evaluation.providers.loopback import LoopbackLLMServer
    from evaluation.tutoring import services

    runs = services.run_start(
        topic_id=topic_id,
        persona=["ace", "struggler", "simplicity_seeker"],
        runs_per_persona=4,
        max_turns=6,
        seed=7,
        enqueue=False,
        started_by="dashboard",
    )
    group = runs[0].group
    with LoopbackLLMServer(responder=second_judge) as judge:
        for judged_by_second in (False, True):
            if judged_by_second:
                LLMConfig.objects.update_or_create(
                    role="judge",
                    defaults={"provider": "openai", "model": SECOND_JUDGE, "base_url": judge.openai_url},
                )
            for run in runs:
                if (run.repeat_index > 2) == judged_by_second:
                    tasks.run_task(run.pk, run.attempt)
        LLMConfig.objects.filter(role="judge").delete()
    judges = set(EvaluationRun.objects.filter(group=group).values_list("judge_label", flat=True))
    assert len(judges) == 2, f"the comparison group should carry two judges, it has {judges}"
    return group


def drift(data_dir: Path) -> None:
    """rex's baseline (in the data folder, not the checkout's baselines/) and a run of rex and ivy after it."""
    from django.core.management import call_command

    quiet = open(os.devnull, "w")  # noqa: SIM115
    call_command("drift_baseline", agents="rex", judge="offline", baselines=data_dir / "baselines", stdout=quiet)
    try:
        call_command("drift_run", mode="live", judge="offline", agents="rex,ivy", stdout=quiet, stderr=quiet)
    except SystemExit:
        pass  # a regression against the baseline exits 1; the run is stored all the same


def suites() -> dict[str, str]:
    """Every shipped suite discovered and run once, as a worker runs it (tool-calling cases included)."""
    from django.core.management import call_command

    from evaluation.models import EvaluationRun, Suite
    from evaluation.suites.services import suite_run_execute, suite_run_start

    call_command("discover_suites", stdout=open(os.devnull, "w"))  # noqa: SIM115
    ran = {}
    for suite in Suite.objects.order_by("path"):
        queued = suite_run_start(suite_id=suite.pk, enqueue=False)
        suite_run_execute(queued.pk, queued.attempt)
        ran[suite.path] = queued.run_id
    assert EvaluationRun.objects.filter(kind="suite", status="completed").count() == len(ran), ran
    return ran


def judging() -> int:
    """The example set imported with its labels, judged three times (a job) and once through the offline batch."""
    from django.core.management import call_command

    from evaluation.models import JudgeConfiguration, ProviderBatch

    quiet = open(os.devnull, "w")  # noqa: SIM115
    call_command("import_transcripts", str(ROOT / "examples" / "judging" / "tutor-responses.json"), stdout=quiet)
    call_command("judge_imported", rubric="tutor-response", provider="offline", repeats=3, stdout=quiet)
    call_command("judge_imported", rubric="tutor-response", provider="offline", batch=True, again=True, stdout=quiet)
    assert ProviderBatch.objects.exists()
    card = JudgeConfiguration.objects.order_by("pk").first()
    assert card is not None, "judge_imported made no judge configuration"
    return card.pk


def live(topic_id: str, data_dir: Path) -> tuple[str, int]:
    """A run left running at turn 2: its tutor (tests/fake_tutor.py, "stops") answers twice and then is silent,
    and this process ends while the worker's thread waits for the third answer, as a worker killed mid-run.
    Call it last: the process must exit right after (os._exit), with the run's heartbeat fresh; the tutor's
    process id is returned for the caller to stop once this process has ended (stopped before, the tutor's
    closed socket would end the run failed)."""
    from evaluation import tasks
    from evaluation.models import Agent, RunMessage
    from evaluation.tutoring import services
    from evaluation.tutoring.server import ServerProcess

    tutor = ServerProcess({"FAKE_TUTOR_MODE": "stops"}, app="tests.fake_tutor:app", log_path=data_dir / "fake.log")
    url = tutor.start().wait(60)
    Agent.objects.create(id="silent-tutor", display_name="A tutor that falls silent", kind="protocol", base_url=url)
    run = services.run_start(
        topic_id=topic_id, persona="average_student", max_turns=14, agent_id="silent-tutor", enqueue=False
    )[0]
    threading.Thread(target=tasks.run_task, args=(run.pk, run.attempt), daemon=True).start()
    deadline = time.monotonic() + 60
    while RunMessage.objects.filter(run=run).count() < 4:
        assert time.monotonic() < deadline, "the live run never reached its second turn"
        time.sleep(0.2)
    time.sleep(1)  # its progress after the second answer stored
    assert tutor.process is not None
    return run.run_id, tutor.process.pid


def build(data_dir: Path) -> dict[str, Any]:
    """Everything above in a migrated, catalogued data folder; returns the pages of interest (paths)."""
    from django.conf import settings
    from django.core.management import call_command

    from evaluation.tutoring import services

    call_command("migrate", interactive=False, verbosity=0)
    call_command("load_catalog", verbosity=0)
    topic_id = "comparing-decimals"
    server = services.ServerProcess(services.own_server_env(), log_path=data_dir / "server.log").start()
    try:
        url = server.wait(600)  # a busy machine can take minutes to start it
        settings.EVALUATION["SERVER_URL"] = url  # where the runs' worker finds the reference tutor
        users()
        runs = tutoring(url, topic_id)
        group = comparison(topic_id)
    finally:
        server.stop()
    drift(data_dir)
    ran = suites()
    card = judging()
    runs["live"], tutor_pid = live(topic_id, data_dir)
    return {
        "dashboard": "/admin/evaluation/",
        "run-report": f"/admin/evaluation/runs/{runs['report']}/",
        "comparison": f"/admin/evaluation/comparisons/{group}/",
        "judge-card": f"/admin/evaluation/judging/{card}/",
        "drift": "/admin/evaluation/drift/rex/",
        "suite-run-tools": f"/admin/evaluation/suites/runs/{ran['skills/fractions/tools.eval.md']}/",
        "suite-cards": "/admin/evaluation/?source=suite",
        "runs": runs,
        "tutor_pid": tutor_pid,
    }


def main() -> None:
    data_dir = Path(sys.argv[1]).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    prepare_environment(data_dir)
    pages = build(data_dir)
    (data_dir / "pages.json").write_text(json.dumps(pages))
    sys.stdout.write(json.dumps(pages) + "\n")
    sys.stdout.flush()
    os._exit(0)  # the live run's thread is still waiting on its silent tutor: leave it running


if __name__ == "__main__":
    main()
