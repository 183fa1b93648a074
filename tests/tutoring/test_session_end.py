"""How a simulated session ends, what the run keeps of it, and which models it names."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import Agent, EvaluationRun

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"


def cli(**options):
    options.setdefault("provider", "offline")
    call_command("run_evaluation", stdout=StringIO(), topic_id=TOPIC, **options)


def folder_of(run, settings):
    return Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id


def test_a_tutor_that_stops_answering_ends_the_session_and_the_partial_transcript_is_judged(
    server, fake_tutor, settings
):
    Agent.objects.create(id="flaky", display_name="Flaky tutor", kind="protocol", base_url=fake_tutor("stops"))
    cli(persona="ace", max_turns=6, seed=1, target="flaky", turn_timeout=1.0)
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    assert list(run.messages.values_list("role", flat=True)) == ["tutor", "student"] * 3
    assert run.config["ended_by"] == "tutor_stopped" and run.config["end_reason"] == "no tutor reply within 1s"
    assert run.dimension_scores.count() == 5 and run.overall_score is not None
    ended = "**Ended:** the tutor stopped answering (no tutor reply within 1s)"
    folder = folder_of(run, settings)
    assert ended in (folder / "conversation.md").read_text() and ended in (folder / "review.md").read_text()
    session = json.loads((folder / "conversation.json").read_text())["session"]
    assert session["ended_by"] == "tutor_stopped" and session["end_reason"] == "no tutor reply within 1s"


def test_a_tutor_that_never_answers_the_student_fails_the_run_nothing_to_judge(server, fake_tutor):
    Agent.objects.create(id="mute", display_name="Mute tutor", kind="protocol", base_url=fake_tutor("silent"))
    with pytest.raises(CommandError, match="1 run\\(s\\) failed"):
        cli(persona="ace", max_turns=3, seed=1, target="mute", turn_timeout=1.0)
    run = EvaluationRun.objects.get()
    assert run.status == "failed" and run.error == "no tutor reply within 1s"
    assert run.config["ended_by"] == "tutor_stopped" and run.dimension_scores.count() == 0


def test_the_final_session_state_is_kept_in_conversation_json(server, settings):
    cli(persona="average_student", max_turns=3, seed=5)
    run = EvaluationRun.objects.get()
    folder = folder_of(run, settings)
    session = json.loads((folder / "conversation.json").read_text())["session"]
    state = session["final_state"]
    assert session["session_id"] == state["session_id"] == run.config["session_id"]
    assert session["ended_by"] == "max_turns" and session["end_reason"] is None
    assert state["topic_id"] == TOPIC and state["message_count"] == run.messages.count() == 7
    assert state["turn"] == 4 and "problem_index" in state and state["is_complete"] is False
    assert "full_conversation_log" not in state  # the transcript is the run's messages
    assert "session_state" not in json.loads((folder / "config.json").read_text())


def test_every_role_names_its_resolved_model_and_the_tutors_tokens_are_counted(server, settings, staff_client):
    call_command("run_evaluation", stdout=StringIO(), topic_id=TOPIC, persona="ace", max_turns=3, seed=8)
    run = EvaluationRun.objects.get()
    assert run.config["provider"] == ""  # started without an override ...
    offline = {"provider": "offline", "model": "offline-rules-v1", "seed": run.seed, "seed_sent": True}
    models = run.config["llm"]
    assert models["simulator"] == {**offline, "source": "default", "temperature": 0.9}
    assert models["judge"] == {**offline, "source": "default", "temperature": None}
    # ... and the reference tutor (its own process) reports its model and usage in the session state
    assert models["tutor"] == {**offline, "source": "environment", "temperature": 0.7}
    tutor_turns = run.messages.filter(role="tutor").count()
    assert run.token_usage["by_role"]["tutor"]["calls"] == tutor_turns == 4
    assert run.token_usage["calls"] == sum(u["calls"] for u in run.token_usage["by_role"].values())
    folder = folder_of(run, settings)
    assert json.loads((folder / "config.json").read_text())["llm"] == models
    assert json.loads((folder / "evaluation.json").read_text())["models"] == models
    assert "tutor `offline/offline-rules-v1` (temperature 0.7" in (folder / "review.md").read_text()
    detail = staff_client.get(f"/api/evaluation/runs/{run.run_id}").json()
    assert detail["evaluation"]["models"] == detail["config"]["llm"] == models


def test_a_chat_endpoint_tutor_is_named_and_counted_by_the_run(server, loopback, settings):
    from tests.tutoring.test_pipeline import JUDGE, scripted

    loopback.responder = scripted(JUDGE)
    Agent.objects.create(
        id="chatty", display_name="Chat tutor", kind="openai_chat", base_url=loopback.openai_url, model="tutor-1"
    )
    cli(persona="ace", max_turns=2, seed=4, target="chatty")
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    tutor = run.config["llm"]["tutor"]
    assert (tutor["provider"], tutor["model"], tutor["seed"], tutor["seed_sent"]) == (
        "openai",
        "tutor-1",
        run.seed,
        True,
    )
    assert run.token_usage["by_role"]["tutor"]["calls"] == 3


def test_a_batch_whose_tutor_server_is_down_fails_every_run_with_its_error_file(catalog, settings, staff_client):
    from evaluation.tutoring.server import free_port

    down = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(CommandError, match="8 run\\(s\\) failed") as raised:
        cli(persona="all", max_turns=3, seed=2, skip_server=True, server_url=down)
    assert "tutor unreachable" in str(raised.value)
    runs = list(EvaluationRun.objects.all())
    assert len(runs) == 8 and {(r.status, r.stage) for r in runs} == {("failed", "failed")}
    for run in runs:
        assert (
            run.error == f"the batch could not start: tutor unreachable: {down}/health/db did not answer ok "
            "(and server management is off)"
        )
        error_file = (folder_of(run, settings) / "error.txt").read_text()
        assert run.error in error_file
    status = staff_client.get("/api/evaluation/status").json()
    assert status["active_runs"] == 0 and status["run_status"] == "failed"


def test_a_session_evaluation_uses_the_topic_its_state_carries(catalog, loopback, settings):
    """The session row points at one topic; its state carries the topic it actually taught."""
    from evaluation.models import Topic, TutoringSession
    from evaluation.tutoring import services
    from tests.tutoring.test_pipeline import JUDGE, scripted

    loopback.responder = scripted(JUDGE)
    taught = {
        "topic_id": "area-and-perimeter",
        "name": "Area of rectangles, as taught",
        "grade": 4,
        "learning_objectives": ["count unit squares before multiplying"],
        "common_misconceptions": ["adds the sides for the area"],
    }
    session = TutoringSession.objects.create(
        topic=Topic.objects.get(topic_id="comparing-decimals"),
        state={"topic": taught},
        full_conversation_log=[
            {"role": "tutor", "content": "What is the area of a 3 by 4 rectangle?"},
            {"role": "student", "content": "14?"},
            {"role": "tutor", "content": "Count the squares: 3 rows of 4."},
        ],
    )
    run = services.session_evaluation_start(
        session_id=str(session.pk), provider=f"openai/j@{loopback.openai_url}", enqueue=False
    )
    services.run_execute(run.pk, run.attempt, action="evaluate")
    run.refresh_from_db()
    assert run.status == "completed", run.error
    assert run.topic.topic_id == "area-and-perimeter"
    judge_prompt = next(r.body for r in loopback.requests if r.body.get("response_format"))["messages"][-1]["content"]
    assert "Name: Area of rectangles, as taught (grade 4)" in judge_prompt
    assert "count unit squares before multiplying" in judge_prompt and "adds the sides" in judge_prompt
    conversation = (folder_of(run, settings) / "conversation.md").read_text()
    assert "**Topic:** Area of rectangles, as taught (grade 4)" in conversation


def chat_tutor(loopback, failure):
    """A chat tutor that answers its opening and two turns, then fails with `failure` for good."""
    from evaluation.providers.loopback import Reply
    from tests.tutoring.test_pipeline import JUDGE

    tutor_calls = []

    def respond(endpoint, body, n):
        if body.get("response_format"):
            return Reply(json=JUDGE)
        if body["model"] == "tutor-1":
            tutor_calls.append(n)
            if len(tutor_calls) > 3:
                return failure
            return Reply(text=f"Good. What is {len(tutor_calls)} + 4?")
        return Reply(text="I think it is 12.")

    loopback.responder = respond
    Agent.objects.create(
        id="chatty", display_name="Chat tutor", kind="openai_chat", base_url=loopback.openai_url, model="tutor-1"
    )


def test_a_chat_endpoint_tutor_that_stops_answering_ends_the_session(server, loopback, settings):
    from evaluation.providers.loopback import Reply

    settings.EVALUATION = {**settings.EVALUATION, "LLM_MAX_ATTEMPTS": 2}
    chat_tutor(loopback, Reply(fault="hang"))
    simulator = f"openai/sim@{loopback.openai_url}"
    cli(persona="ace", max_turns=6, seed=4, target="chatty", provider=simulator, turn_timeout=0.5)
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    assert list(run.messages.values_list("role", flat=True)) == ["tutor", "student"] * 3
    assert run.config["ended_by"] == "tutor_stopped" and "no reply within" in run.config["end_reason"]
    assert run.overall_score == 5.0


def test_a_chat_endpoint_tutor_that_becomes_unreachable_fails_the_run(server, loopback, settings):
    from evaluation.providers.loopback import Reply

    settings.EVALUATION = {**settings.EVALUATION, "LLM_MAX_ATTEMPTS": 2}
    chat_tutor(loopback, Reply(status=503, error_message="tutor overloaded"))
    with pytest.raises(CommandError, match="1 run\\(s\\) failed"):
        cli(persona="ace", max_turns=6, seed=4, target="chatty", provider=f"openai/sim@{loopback.openai_url}")
    run = EvaluationRun.objects.get()
    assert run.status == "failed" and run.config["ended_by"] == "tutor_unreachable"
    assert run.error.startswith("the tutor became unreachable after 2/6 answered turns: the tutor's endpoint")
    assert "tutor overloaded" in run.error and run.dimension_scores.count() == 0
    assert list(run.messages.values_list("role", flat=True)) == ["tutor", "student"] * 3


def test_a_web_server_killed_mid_run_fails_the_run_with_the_turn_reached(
    catalog, loopback, settings, staff_client, q_sync, tmp_path
):
    """The tutor's web server is SIGKILLed mid-conversation: an infrastructure failure, not a measurement."""
    import os
    import signal
    import threading
    import time

    from evaluation.models import BaselineGate
    from evaluation.tutoring import services
    from tests.servers import killable_server
    from tests.tutoring.test_pipeline import JUDGE, scripted

    loopback.responder = scripted(JUDGE)
    provider = f"openai/sim@{loopback.openai_url}"
    options = {"persona": "ace", "max_turns": 30, "seed": 2, "provider": provider, "skip_server": True}
    with killable_server({}, tmp_path / "web.log") as (url, web):
        cli(**options, runs_per_persona=2, server_url=url)
        baseline = EvaluationRun.objects.get(repeat_index=1).group
        loopback.latency = 0.05  # the student takes a moment a turn, so the kill lands mid-conversation
        failed = {}

        def batch():
            try:
                cli(**options, server_url=url, baseline=baseline)
            except CommandError as exc:
                failed["error"] = str(exc)

        thread = threading.Thread(target=batch)
        thread.start()
        deadline = time.monotonic() + 60
        while not EvaluationRun.objects.exclude(group=baseline).filter(turn__gte=5).exists():
            assert time.monotonic() < deadline and thread.is_alive(), "the batch never reached turn 5"
            time.sleep(0.05)
        os.killpg(web.pid, signal.SIGKILL)
        thread.join(60)
    run = EvaluationRun.objects.exclude(group=baseline).get()
    reached = run.config["turns_answered"]
    assert run.status == "failed" and run.config["ended_by"] == "tutor_unreachable"
    assert 5 <= reached < 30 and f"the tutor became unreachable after {reached}/30 answered turns" in run.error
    assert "the WebSocket closed abnormally (code 1006" in run.error
    assert run.dimension_scores.count() == 0 and run.overall_score is None
    assert run.messages.filter(role="tutor").count() >= reached + 1  # the greeting and every answer, kept
    # the batch's gate counted nothing: not a pass, and the command failed saying so
    assert "not compared: no run of the batch counts" in failed["error"] and "1 run(s) failed" in failed["error"]
    assert BaselineGate.objects.get(group=run.group).outcome == "not compared"
    detail = staff_client.get(f"/api/evaluation/runs/{run.run_id}").json()
    coverage = detail["coverage"]
    assert detail["status"] == "failed" and abs(coverage.pop("share") - reached / 30) < 1e-9
    assert coverage == {"turns_answered": reached, "max_turns": 30, "cut_short": True, "counted": False}

    # judged on request: partial, shown as such, and still left out of the comparison
    loopback.latency = 0.0
    retried = services.run_retry_evaluation_start(run=run)
    run.refresh_from_db()
    assert retried.pk == run.pk and run.status == "completed" and run.dimension_scores.count() == 5
    review = (folder_of(run, settings) / "review.md").read_text()
    assert f"**Coverage:** judged on {reached}/30 turns (partial)" in review
    page = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    assert f"Partial: judged on {reached}/30 turns</b>, below the 80% comparisons count" in page
    gate = BaselineGate.objects.get(group=run.group)
    assert gate.outcome == "not compared"
    assert gate.detail["left_out"] == [f"{run.run_id}: judged on {reached}/30 turns, below the coverage threshold 80%"]
