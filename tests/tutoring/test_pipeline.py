"""The tutor-evaluation pipeline through its doors: CLI, HTTP API, tasks, with faults."""

import json
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from evaluation.models import Agent, EvaluationRun, Problem, TutoringSession
from evaluation.providers.loopback import Reply
from evaluation.tutoring.reports import ARTIFACTS, write_run_reports
from evaluation.tutoring.selectors import run_report_context
from evaluation.tutoring.server import free_port
from tests.servers import SERVER_ENV, database_url_for_tests, qcluster_worker

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
TOPIC = "two-digit-addition-regrouping"


def cli(*args, **kwargs):
    out = StringIO()
    call_command("run_evaluation", *args, stdout=out, **kwargs)
    return out.getvalue()


def test_cli_runs_every_persona_offline_with_reports_and_comparison(server, settings):
    out = cli(persona="all", provider="offline", topic_id=TOPIC, max_turns=6, seed=7, workers=2)
    runs = list(EvaluationRun.objects.all())
    assert len(runs) == 8 and {r.status for r in runs} == {"completed"}
    assert "persona" in out and "struggler" in out and "offline rule-based judge" in out and "Comparison:" in out
    for run in runs:
        folder = Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id
        assert sorted(p.name for p in folder.iterdir()) == sorted(ARTIFACTS), run.run_id
        assert run.run_id.startswith("run_") and run.persona.persona_id in run.run_id
        assert 1 <= run.turn <= 6 and run.dimension_scores.count() == 5
        evaluation = json.loads((folder / "evaluation.json").read_text())
        assert evaluation["offline"] is True and evaluation["summary"].startswith("[offline rule-based judge]")
        log = (folder / "run.log").read_text().splitlines()
        assert log and all(line[19] == "." and line[20:23].isdigit() for line in log)  # millisecond stamps
        students = run.messages.filter(role="student")
        assert all("turn_decision" in m.metadata for m in students)
    group = runs[0].group
    comparison = Path(settings.EVALUATION["RUNS_DIR"]) / group
    data = json.loads((comparison / "comparison.json").read_text())
    assert set(data["personas"]) == {r.persona.persona_id for r in runs}
    assert "| persona | responsiveness |" in (comparison / "comparison.md").read_text()


def test_same_seed_replays_the_same_decisions(server):
    cli(persona="ace", provider="offline", topic_id=TOPIC, max_turns=4, seed=99)
    cli(persona="ace", provider="offline", topic_id=TOPIC, max_turns=4, seed=99)
    first, second = EvaluationRun.objects.order_by("created_at")
    assert first.config["turn_decisions"] == second.config["turn_decisions"] != []


def test_runs_per_persona_averages_with_spread(server, settings):
    cli(persona="quiet_one", provider="offline", topic_id=TOPIC, max_turns=4, seed=3, runs_per_persona=3)
    runs = EvaluationRun.objects.order_by("repeat_index")
    assert [r.repeat_index for r in runs] == [1, 2, 3] and all(r.run_id.endswith(f"_r{r.repeat_index}") for r in runs)
    text = (Path(settings.EVALUATION["RUNS_DIR"]) / runs[0].group / "comparison.md").read_text()
    assert "up to 3 per persona: mean [95% confidence interval]" in text and "## Runs" in text
    # one table per persona, one row per run, with its turns and the five dimensions
    header = "| run | status | turns | responsiveness | explanation quality | emotional attunement | pacing"
    assert f"### Meera\n\n{header}" in text  # the persona by its name
    for run in runs:
        scores = {s.dimension: s.score for s in run.dimension_scores.all()}
        row = f"| {run.run_id} | completed | {run.config['turns_answered']}/4 | " + " | ".join(
            f"{scores[d]:g}"
            for d in ("responsiveness", "explanation_quality", "emotional_attunement", "pacing", "authenticity")
        )
        assert row + f" | {run.overall_score:g} |" in text, row


@pytest.fixture
def api(client, staff_user, q_sync):
    client.force_login(staff_user)
    return client


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_api_start_runs_in_background_and_reports(server, api):
    response = post(
        api,
        "/api/evaluation/start",
        {"topic_id": TOPIC, "persona_file": "average_student.json", "max_turns": 5, "seed": 1},
    )
    assert response.status_code == 202, response.content
    run_id = response.json()["run_id"]
    status = api.get(f"/api/evaluation/status?run_id={run_id}").json()
    assert status["status"] == "completed" and status["max_turns"] == 5 and status["error"] is None
    listing = api.get("/api/evaluation/runs").json()
    entry = listing["results"][0]
    assert listing["count"] == 1 and entry["run_id"] == run_id and entry["source"] == "simulated"
    assert set(entry["scores"]) == {
        "responsiveness",
        "explanation_quality",
        "emotional_attunement",
        "pacing",
        "authenticity",
    }
    assert entry["avg_score"] == pytest.approx(sum(entry["scores"].values()) / 5, abs=0.01)
    detail = api.get(f"/api/evaluation/runs/{run_id}").json()
    assert detail["messages"][0]["role"] == "tutor" and detail["evaluation"]["scores"] == entry["scores"]
    assert api.get(f"/api/evaluation/runs/{run_id}/status").json()["status"] == "completed"


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        ({"topic_id": "nope", "persona_file": "ace.json"}, 404, "no topic 'nope'; the topics are: "),
        ({"topic_id": TOPIC, "persona_file": "nobody.json"}, 404, "no persona 'nobody'; the personas are: ace, "),
        ({"topic_id": TOPIC, "persona_file": "../../etc/passwd"}, 400, "not a path"),
        ({"topic_id": TOPIC, "persona_file": "ace.json", "max_turns": 0}, 400, "max_turns"),
        ({"topic_id": TOPIC, "persona_file": "ace.json", "max_turns": 500}, 400, "max_turns"),
        ({"persona_file": "ace.json"}, 400, "topic_id"),
        ({"topic_id": TOPIC, "provider": "gemini"}, 400, "unknown provider 'gemini'"),
    ],
)
def test_api_start_bad_input(server, api, body, code, needle):
    response = post(api, "/api/evaluation/start", body)
    assert response.status_code == code and needle in response.json()["error"], response.content
    assert EvaluationRun.objects.count() == 0


def test_api_refuses_when_the_queue_is_at_its_limit(server, api, settings):
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 1, "MAX_QUEUED_RUNS": 0}
    EvaluationRun.objects.create(run_id="run_busy", status="running")
    response = post(api, "/api/evaluation/start", {"topic_id": TOPIC, "persona_file": "ace.json"})
    assert response.status_code == 409 and "queue limit is 0" in response.json()["error"]


def test_api_needs_staff_or_token(server, client, staff_user, q_sync):
    # Anonymous requests are unauthenticated (401, with the scheme to use), not forbidden.
    anonymous = client.get("/api/evaluation/runs")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    token = Token.objects.create(user=staff_user)
    response = client.get("/api/evaluation/runs", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    assert client.get("/api/evaluation/runs/run_nope").status_code == 401


def test_api_unknown_run_is_404(server, api):
    for url in ("/api/evaluation/runs/run_nope", "/api/evaluation/runs/run_nope/status"):
        response = api.get(url)
        assert response.status_code == 404 and "no run 'run_nope'" in response.json()["error"]
    assert post(api, "/api/evaluation/runs/run_nope/retry-evaluation", {}).status_code == 404


def test_evaluate_existing_session_maps_teacher_to_tutor(server, api, catalog):
    from evaluation.models import Topic

    session = TutoringSession.objects.create(
        topic=Topic.objects.get(topic_id=TOPIC),
        conversation_history=[
            {"role": "teacher", "content": "What is 25 + 17?"},
            {"role": "student", "content": "I'm not sure... 32?"},
            {"role": "teacher", "content": "Not quite. Add the ones first. Try again: What is 25 + 17?"},
            {"role": "student", "content": "42"},
        ],
    )
    response = post(api, "/api/evaluation/evaluate-session", {"session_id": str(session.pk)})
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert run.status == "completed" and run.source == "existing_session" and run.source_session_id == session.pk
    assert list(run.messages.values_list("role", flat=True)) == ["tutor", "student", "tutor", "student"]
    listed = api.get("/api/evaluation/runs?source=existing_session").json()["results"][0]
    assert listed["source_session_id"] == str(session.pk)
    bad = post(api, "/api/evaluation/evaluate-session", {"session_id": "not-a-uuid"})
    assert bad.status_code == 400 and "session_id" in bad.json()["error"]
    missing = post(api, "/api/evaluation/evaluate-session", {"session_id": "00000000-0000-0000-0000-000000000000"})
    assert missing.status_code == 404


JUDGE = {
    "scores": {
        "responsiveness": 3,
        "explanation_quality": 8,
        "emotional_attunement": 2,
        "pacing": 7,
        "authenticity": 5,
    },
    "dimension_analysis": {
        d: f"analysis of {d}"
        for d in ["responsiveness", "explanation_quality", "emotional_attunement", "pacing", "authenticity"]
    },
    "problems": [
        {
            "title": "Ignores the student's doubt",
            "turns": [2, 3],
            "description": "d1",
            "quote": "I THINK it is 12",
            "severity": "critical",
            "root_cause": "missed_student_signal",
        },
        {
            "title": "Invented evidence",
            "turns": [4],
            "description": "d2",
            "quote": "the moon is made of cheese",
            "severity": "minor",
            "root_cause": "other",
        },
    ],
    "summary": "Scripted judge verdict.",
}


def scripted(judge_reply):
    def respond(endpoint, body, n):
        schema_requested = body.get("response_format") is not None
        if schema_requested:
            return judge_reply() if callable(judge_reply) else Reply(json=judge_reply)
        return Reply(text="I think it is 12.")

    return respond


def test_llm_judge_scores_and_problems_land_in_db_and_files(server, loopback, settings, tmp_path):
    loopback.responder = scripted(JUDGE)
    provider = f"openai/judge-model@{loopback.openai_url}"
    cli(persona="average_student", provider=provider, topic_id=TOPIC, max_turns=3, seed=4)
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    assert {s.dimension: s.score for s in run.dimension_scores.all()} == JUDGE["scores"]
    assert run.overall_score == 5.0 and run.judge_label == "openai/judge-model"
    problems = list(Problem.objects.filter(run=run).order_by("rank"))
    assert [(p.title, p.quote_found) for p in problems] == [
        ("Ignores the student's doubt", True),
        ("Invented evidence", False),
    ]
    folder = Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id
    evaluation = json.loads((folder / "evaluation.json").read_text())
    assert evaluation["scores"] == JUDGE["scores"] and evaluation["problems"][1]["quote_found"] is False
    assert "quote not found in the transcript" in (folder / "review.md").read_text()
    problems_md = (folder / "problems.md").read_text()
    assert "| missed_student_signal | 1 |" in problems_md and "Increase the conversation" not in problems_md
    assert "Have the tutor check the student's last message" in problems_md
    assert "`███░░░░░░░`" in (folder / "review.md").read_text()
    # The run wrote its reports from the rows as its judge stage stored them: written again from the
    # database alone, they say the same (PostgreSQL's jsonb gives a stored dict's keys in an order of its own).
    write_run_reports(tmp_path, run_report_context(run))
    for name in ("evaluation.json", "conversation.json"):
        assert json.loads((tmp_path / name).read_text()) == json.loads((folder / name).read_text()), name
    for name in ("review.md", "problems.md"):
        assert (tmp_path / name).read_text() == (folder / name).read_text(), name
    assert json.loads((folder / "config.json").read_text())["provider"] == provider
    assert run.token_usage["by_role"]["judge"]["calls"] == 1 and run.token_usage["by_role"]["simulator"]["calls"] == 3
    # the judge saw the transcript, persona and topic as spec 001 builds them
    judge_request = next(r.body for r in loopback.requests if r.body.get("response_format"))
    user = judge_request["messages"][-1]["content"]
    assert (
        "[Turn 1] TUTOR: Hi!" in user and "Name: Riya (id: average_student)" in user and "Learning objectives:" in user
    )


def test_invalid_judge_reply_fails_then_retry_evaluation_succeeds(server, loopback, api, settings):
    loopback.responder = scripted(lambda: Reply(text='{"scores": "broken"'))
    cli_error = None
    try:
        cli(persona="ace", provider=f"openai/j@{loopback.openai_url}", topic_id=TOPIC, max_turns=2, seed=4)
    except CommandError as exc:
        cli_error = str(exc)
    run = EvaluationRun.objects.get()
    assert run.status == "failed" and run.stage == "failed" and "after one repair" in run.error
    assert cli_error and "1 run(s) failed" in cli_error
    folder = Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id
    assert (folder / "judge_raw.txt").read_text().startswith('{"scores": "broken"')
    assert "after one repair" in (folder / "error.txt").read_text()
    assert run.messages.count() == 5  # the transcript survives the failed judge

    loopback.responder = scripted(JUDGE)
    response = post(api, f"/api/evaluation/runs/{run.run_id}/retry-evaluation", {})
    assert response.status_code == 202
    run.refresh_from_db()
    assert run.status == "completed" and run.overall_score == 5.0 and not (folder / "error.txt").exists()
    assert run.messages.count() == 5  # not re-simulated


def fail_run(target_url, turn_timeout=5.0):
    Agent.objects.create(id="external", display_name="External tutor", kind="protocol", base_url=target_url)
    with pytest.raises(CommandError, match="1 run\\(s\\) failed"):
        cli(
            persona="ace",
            provider="offline",
            topic_id=TOPIC,
            max_turns=3,
            seed=1,
            target="external",
            turn_timeout=turn_timeout,
        )
    return EvaluationRun.objects.get()


def test_unreachable_tutor_fails_the_run_with_the_reason(server, settings):
    run = fail_run(f"http://127.0.0.1:{free_port()}")
    assert run.status == "failed" and "tutor unreachable" in run.error
    assert "tutor unreachable" in (Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id / "error.txt").read_text()


def test_tutor_closing_the_socket_keeps_the_messages(server, fake_tutor, settings):
    run = fail_run(fake_tutor("close"))
    assert run.error == (
        "the tutor became unreachable after 0/3 answered turns: "
        "the WebSocket closed abnormally (code 1011: no reason given)"
    )
    assert run.config["ended_by"] == "tutor_unreachable"
    assert list(run.messages.values_list("role", flat=True)) == ["tutor", "student"]
    saved = json.loads((Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id / "conversation.json").read_text())
    assert [m["role"] for m in saved["messages"]] == ["tutor", "student"]


def test_a_tutor_whose_database_is_away_for_a_moment_is_waited_for_and_the_run_completes_whole(server, fake_tutor):
    """The tutor twice answers "database: unavailable ... retry_after" and closes with 1013, then answers:
    the turn is sent again on a new socket, not taken as the tutor stopping."""
    Agent.objects.create(id="external", display_name="External tutor", kind="protocol", base_url=fake_tutor("outage"))
    cli(persona="ace", provider="offline", topic_id=TOPIC, max_turns=4, seed=1, target="external", turn_timeout=5.0)
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    assert run.config["ended_by"] == "max_turns" and run.config["turns_answered"] == 4, run.config
    assert list(run.messages.values_list("role", flat=True)) == ["tutor"] + ["student", "tutor"] * 4


def test_a_tutor_whose_database_never_comes_back_fails_the_run_with_the_turn_reached(server, fake_tutor, settings):
    settings.EVALUATION = {**settings.EVALUATION, "RUN_STALE_AFTER": 1.5}
    run = fail_run(fake_tutor("down"))
    assert run.status == "failed" and run.config["ended_by"] == "tutor_unreachable", run.config
    assert run.error.startswith(
        "the tutor became unreachable after 2/3 answered turns: the tutor could not serve the conversation for 1.5 s"
    ), run.error
    assert "database: unavailable" in run.error and run.dimension_scores.count() == 0


def test_silent_tutor_times_out(server, fake_tutor):
    run = fail_run(fake_tutor("silent"), turn_timeout=1.0)
    assert run.error == "no tutor reply within 1s" and run.messages.count() == 2


def test_tutor_error_frame_fails_the_run(server, fake_tutor):
    run = fail_run(fake_tutor("error"))
    assert run.error == "tutor error: tutor crashed"


def test_a_real_qcluster_worker_runs_the_task(server, api, tmp_path):
    from django_q.conf import Conf

    Conf.SYNC = False  # this test wants the real queue: q_sync's monkeypatch restores it afterwards
    env = {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_SERVER_URL": server,
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
    }
    with qcluster_worker(env, tmp_path / "q.log"):
        response = post(
            api, "/api/evaluation/start", {"topic_id": TOPIC, "persona_file": "ace", "max_turns": 3, "seed": 2}
        )
        assert response.status_code == 202
        run_id = response.json()["run_id"]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status = api.get(f"/api/evaluation/status?run_id={run_id}").json()
            if status["status"] in ("completed", "failed"):
                break
            time.sleep(0.5)
    assert status["status"] == "completed", (status, (tmp_path / "q.log").read_text()[-2000:])
    assert (tmp_path / "runs" / run_id / "review.md").exists()


def test_grade_flag_is_the_students_grade_in_the_run_and_its_reports(server, settings):
    cli(persona="ace", provider="offline", topic_id=TOPIC, max_turns=2, seed=3, grade=7)
    run = EvaluationRun.objects.get()
    folder = Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id
    assert run.config["grade"] == 7 and run.persona.grade != 7
    assert "grade 7" in (folder / "review.md").read_text() and "grade 7" in (folder / "conversation.md").read_text()
    assert json.loads((folder / "conversation.json").read_text())["config"]["grade"] == 7
    with pytest.raises(CommandError, match="grade: 13 is out of range"):
        cli(persona="ace", provider="offline", topic_id=TOPIC, max_turns=2, grade=13)


def test_a_failing_tutor_llm_keeps_the_students_message_and_the_session_id(catalog, loopback, tmp_path, settings):
    """The reference tutor's LLM answers the opening, then fails: what the student said is stored anyway."""
    from evaluation.providers.loopback import Reply as LoopReply
    from evaluation.tutoring.server import managed_server

    env = {
        **SERVER_ENV,
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_TUTOR_PROVIDER": f"openai/tutor@{loopback.openai_url}",
        "EVAL_LLM_MAX_ATTEMPTS": "1",
    }
    loopback.script("Hi! Let's start: what is 27 + 15?", *[LoopReply(status=500, error_message="tutor down")] * 5)
    with managed_server(env, log_path=tmp_path / "server.log") as url:
        with pytest.raises(CommandError, match="1 run\\(s\\) failed"):
            cli(
                persona="ace", provider="offline", topic_id=TOPIC, max_turns=3, seed=1, server_url=url, skip_server=True
            )
    run = EvaluationRun.objects.get()
    assert run.status == "failed" and "tutor" in run.error
    session = TutoringSession.objects.get(pk=run.config["session_id"])  # recorded before the failure
    roles = [m["role"] for m in session.full_conversation_log]
    assert roles == ["tutor", "student"], session.full_conversation_log
    assert session.full_conversation_log[1]["content"] == run.messages.get(role="student").content
