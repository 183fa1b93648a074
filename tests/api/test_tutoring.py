"""Starting tutor runs through the API: what is queued, and what is refused before anything is stored."""

import pytest

from evaluation.models import EvaluationRun, RunMessage, Topic, TutoringSession

from .conftest import make_run

pytestmark = pytest.mark.django_db
TOPIC = "comparing-decimals"


def start(api, **body):
    return api.post("/api/evaluation/start", {"topic_id": TOPIC, **body}, format="json")


def test_start_queues_one_run_per_persona_and_repeat(api, catalog, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        response = start(api, persona_file="ace.json", runs_per_persona=2, max_turns=4, seed=3, provider="offline")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and len(body["run_ids"]) == 2 and body["run_id"] == body["run_ids"][0]
    runs = EvaluationRun.objects.filter(run_id__in=body["run_ids"])
    assert {r.group for r in runs} == {body["group"]} and {r.max_turns for r in runs} == {4}
    assert len(queued) == 2


def test_start_with_a_provider_whose_key_is_missing_names_the_variable(api, catalog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    response = start(api, persona_file="ace", provider="anthropic")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    response = start(api, persona_file="ace", provider="anthropic")
    assert response.status_code == 400, response.content
    reasons = response.json()["fields"]["provider"]
    assert reasons == [
        "role 'simulator' uses anthropic (override) but ANTHROPIC_API_KEY is not set",
        "role 'judge' uses anthropic (override) but ANTHROPIC_API_KEY is not set",
    ]
    assert EvaluationRun.objects.count() == 0


def test_a_configured_provider_without_its_key_is_refused_too(api, catalog, monkeypatch):
    from evaluation.models import LLMConfig

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    LLMConfig.objects.create(role="judge", provider="openai", model="gpt-5-mini")
    response = start(api, persona_file="ace")
    assert response.status_code == 400 and "OPENAI_API_KEY is not set" in response.json()["error"]


def test_a_local_openai_compatible_server_needs_no_key(api, catalog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    response = start(api, persona_file="ace", provider="openai/llama3@http://127.0.0.1:11434/v1")
    assert response.status_code == 202, response.content


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"persona_file": "ace", "max_turns": "many"}, 400, "max_turns"),
        ({"persona_file": "ace", "runs_per_persona": 21}, 400, "runs_per_persona"),
        ({"persona_file": "ace", "provider": "gemini"}, 400, "provider"),
        ({"persona_file": "ace", "cost_limit_usd": -1}, 400, "cost_limit_usd"),
        ({"persona_file": "../ace.json"}, 400, "persona"),
        ({"persona_file": "ace", "target": "nobody"}, 404, None),
        ({"persona_file": "nobody"}, 404, None),
    ],
)
def test_start_refuses_bad_input(api, catalog, body, code, field):
    response = start(api, **body)
    assert response.status_code == code, response.content
    if field:
        assert field in response.json()["fields"]
    assert EvaluationRun.objects.count() == 0


def test_start_refuses_an_unreadable_body(api, catalog):
    response = api.post("/api/evaluation/start", "{not json", content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["error"]


def test_start_refuses_a_body_over_the_upload_limit(api, catalog, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = start(api, persona_file="ace", target="x" * 2000)
    assert response.status_code == 413 and "the limit is 1000 bytes" in response.json()["error"]


def test_a_start_beyond_the_active_limit_waits_and_a_full_queue_is_409(
    api, catalog, settings, django_capture_on_commit_callbacks
):
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 1, "MAX_QUEUED_RUNS": 1}
    make_run("run_busy", status="running")
    with django_capture_on_commit_callbacks(execute=True):
        response = start(api, persona_file="ace")
    assert response.status_code == 202 and response.json()["status"] == "queued", response.content
    waiting = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert (waiting.status, waiting.sent_attempt) == ("queued", 0)  # no task yet: the one slot is taken
    full = start(api, persona_file="ace")
    assert full.status_code == 409, full.content
    assert "the queue limit is 1 (EVAL_MAX_QUEUED_RUNS)" in full.json()["error"]


def test_evaluate_session_queues_a_judged_copy(api, catalog, django_capture_on_commit_callbacks):
    session = TutoringSession.objects.create(
        topic=Topic.objects.get(topic_id=TOPIC),
        conversation_history=[{"role": "teacher", "content": "0.3 or 0.25?"}, {"role": "student", "content": "0.3"}],
    )
    with django_capture_on_commit_callbacks() as queued:
        response = api.post("/api/evaluation/evaluate-session", {"session_id": str(session.pk)}, format="json")
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert run.source == "existing_session" and response.json()["status"] == "queued" and len(queued) == 1
    assert api.post("/api/evaluation/evaluate-session", {"session_id": "nope"}, format="json").status_code == 400
    missing = api.post(
        "/api/evaluation/evaluate-session", {"session_id": "00000000-0000-0000-0000-000000000000"}, format="json"
    )
    assert missing.status_code == 404


def test_retry_evaluation_rejudges_a_tutor_run(api, db, django_capture_on_commit_callbacks):
    run = make_run("run_misjudged", status="failed")
    empty = api.post("/api/evaluation/runs/run_misjudged/retry-evaluation")
    assert empty.status_code == 409 and "no stored conversation" in empty.json()["error"]
    RunMessage.objects.create(run=run, turn=1, role="tutor", content="Hi", timestamp=run.created_at)
    with django_capture_on_commit_callbacks() as queued:
        response = api.post("/api/evaluation/runs/run_misjudged/retry-evaluation")
    assert response.status_code == 202 and response.json()["attempt"] == 2 and len(queued) == 1
    assert api.post("/api/evaluation/runs/run_misjudged/retry-evaluation").status_code == 409
    make_run("drift_x", kind="drift")
    assert api.post("/api/evaluation/runs/drift_x/retry-evaluation").status_code == 404


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/evaluation/evaluate-session", "session"),
        ("/api/drift/agents/rex/evaluate", {}),
        ("/api/evaluation/runs/run_done/retry", {}),
    ],
)
def test_every_start_is_409_at_capacity(api, catalog, settings, url, body):
    if body == "session":
        session = TutoringSession.objects.create(
            topic=Topic.objects.get(topic_id=TOPIC), conversation_history=[{"role": "teacher", "content": "Hi"}]
        )
        body = {"session_id": str(session.pk)}
    make_run("run_done")
    make_run("run_busy", status="running")
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 1, "MAX_QUEUED_RUNS": 0}
    response = api.post(url, body, format="json")
    assert response.status_code == 409 and "EVAL_MAX_ACTIVE_RUNS" in response.json()["error"], response.content
    assert EvaluationRun.objects.count() == 2


def test_start_with_a_grade_makes_it_the_students_grade(api, catalog):
    response = start(api, persona_file="ace", grade=7, provider="offline")
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert run.config["grade"] == 7 and run.persona.grade == 5
    refused = start(api, persona_file="ace", grade=13)
    assert refused.status_code == 400 and "grade" in refused.json()["fields"]


def test_run_kinds_stay_apart_in_the_run_list_and_the_status(api, catalog):
    """A drift or suite run never reads as a simulated tutor run, and /status can keep to one kind."""
    from evaluation.models.runs import RunKind
    from evaluation.runs.services import run_create

    tutor = start(api, persona_file="ace", provider="offline").json()["run_id"]
    drift = api.post("/api/drift/agents/rex/evaluate", {"judge": "offline"}, format="json").json()["run_id"]
    suite = run_create(base_id="suite_x", kind=RunKind.SUITE).run_id
    sources = {r["run_id"]: r["source"] for r in api.get("/api/evaluation/runs").json()["results"]}
    assert sources == {tutor: "simulated", drift: "drift", suite: "suite"}
    simulated = api.get("/api/evaluation/runs?source=simulated").json()["results"]
    assert [r["run_id"] for r in simulated] == [tutor]
    assert [r["run_id"] for r in api.get("/api/evaluation/runs?kind=tutor").json()["results"]] == [tutor]
    # the suite run is the newest active run, but a tutoring client asks for its own kind
    assert api.get("/api/evaluation/status").json()["run_id"] == suite
    status = api.get("/api/evaluation/status?kind=tutor").json()
    assert (status["run_id"], status["kind"], status["active_runs"]) == (tutor, "tutor", 1)
    assert api.get("/api/evaluation/status?kind=drift").json()["run_id"] == drift
    assert api.get("/api/evaluation/status?kind=nonsense").status_code == 400
    assert api.get(f"/api/evaluation/status?kind=tutor&run_id={drift}").status_code == 404


def test_a_re_evaluation_waiting_in_the_queue_reports_the_queued_stage(api, runs):
    from django.utils import timezone

    RunMessage.objects.create(run=runs["ace"], turn=1, role="tutor", content="Hi", timestamp=timezone.now())
    response = api.post(f"/api/evaluation/runs/{runs['ace'].run_id}/retry-evaluation")
    assert response.status_code == 202, response.content
    status = api.get(f"/api/evaluation/status?run_id={runs['ace'].run_id}").json()
    assert (status["status"], status["run_status"], status["attempt"]) == ("queued", "queued", 2)
    assert status["detail"] == "Waiting to re-evaluate" and status["error"] is None


def test_start_against_a_baseline_records_it_or_says_why_not(api, runs):
    """run_ace (judged offline) as the baseline: its means are kept with the new runs; another judge is refused."""
    from evaluation.models import DimensionScore
    from evaluation.tutoring.judge import judge_config

    ours = judge_config("offline/offline-rules-v1")  # what a run judged offline records
    EvaluationRun.objects.filter(run_id="run_ace").update(
        judge_label="offline/offline-rules-v1", config={"judge_config": ours}
    )
    response = start(api, persona_file="ace", provider="offline", runs_per_persona=2, baseline="run_ace")
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    scores = dict(DimensionScore.objects.filter(run__run_id="run_ace").values_list("dimension", "score"))
    base = EvaluationRun.objects.get(run_id="run_ace")
    assert run.config["baseline"] == {
        "id": "run_ace",
        "judge": "offline/offline-rules-v1",
        "judge_config": ours,
        "forced": False,
        "mismatches": [],
        "rule": "noise-aware",
        "threshold": 1.0,
        "alpha": 0.05,
        "power": 0.8,
        "means": {"ace": {**scores, "average": 7.0}},
        # each run's scores with its persona, topic and seed: the gate's spread and pairs
        "runs": [
            {"run_id": "run_ace", "persona_id": "ace", "topic": run.topic.topic_id, "seed": base.seed, "scores": scores}
        ],
    }
    bad_rates = start(api, persona_file="ace", provider="offline", baseline="run_ace", alpha=0.6, power=0.3)
    assert bad_rates.status_code == 400 and {"alpha", "power"} <= set(bad_rates.json()["fields"])
    refused = start(api, persona_file="ace", provider="openai/j@http://127.0.0.1:9/v1", baseline="run_ace")
    reason = refused.json()["fields"]["baseline"][0]
    assert (
        refused.status_code == 400 and "judge: the baseline has offline/offline-rules-v1, this batch openai/j" in reason
    )
    assert start(api, persona_file="ace", provider="offline", baseline="nothing").status_code == 404
    bad_rule = start(api, persona_file="ace", provider="offline", baseline="run_ace", regression_rule="vibes")
    assert bad_rule.status_code == 400 and "regression_rule" in bad_rule.json()["fields"]


def test_a_worker_whose_tutor_is_down_fails_the_run_and_starts_no_server(
    api, catalog, settings, q_sync, django_capture_on_commit_callbacks
):
    """The worker's path (django-q2 runs the task): the configured reference tutor fails its health
    check, so the run ends failed with the reason, and the worker starts no tutor server of its own."""
    import psutil

    from evaluation.tutoring.server import free_port

    down = f"http://127.0.0.1:{free_port()}"
    settings.EVALUATION = {**settings.EVALUATION, "SERVER_URL": down}
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with django_capture_on_commit_callbacks(execute=True):
        response = start(api, persona_file="ace", max_turns=3, seed=1, provider="offline")
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert (run.status, run.stage) == ("failed", "failed")
    assert run.error == f"tutor unreachable: {down}/health/db did not answer ok (and server management is off)"
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert started == []
    assert RunMessage.objects.filter(run=run).count() == 0
