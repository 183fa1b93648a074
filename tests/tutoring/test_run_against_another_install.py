"""A run started through the API (as the dashboard's and the API's starts go to qcluster) whose reference tutor
is another install's server: the run fails saying the server refused this install's protocol key, not with a
bare "401"; an external agent refused with its own credential keeps the server's plain answer."""

import json

import pytest

from evaluation.models import Agent, EvaluationRun
from evaluation.tutoring.server import managed_server

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"


@pytest.fixture(scope="module")
def other_install(tmp_path_factory):
    """The app of another install under uvicorn: its own data folder, database, secret key and protocol key."""
    folder = tmp_path_factory.mktemp("another-install")
    env = {
        "EVAL_DATA_DIR": str(folder),
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "DJANGO_SECRET_KEY": "yet-another-install-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "EVAL_PROTOCOL_KEY": "",
        "EVAL_SERVER_URL": "",
    }
    with managed_server(env, log_path=folder / "server.log") as url:
        yield url


@pytest.fixture
def api(client, staff_user, q_sync, catalog, monkeypatch, settings, other_install):
    """Staff's API, with tasks run in this process, and this install's tutor configured at the other's URL."""
    monkeypatch.delenv("EVAL_SERVER_URL", raising=False)
    settings.EVALUATION = {**settings.EVALUATION, "SERVER_URL": other_install}
    client.force_login(staff_user)
    return client


def start(api, **extra):
    body = {"topic_id": TOPIC, "persona_file": "ace", "max_turns": 3, "provider": "offline", **extra}
    response = api.post("/api/evaluation/start", json.dumps(body), content_type="application/json")
    assert response.status_code == 202, response.content
    return EvaluationRun.objects.get(run_id=response.json()["run_id"])


def test_a_run_against_another_install_s_tutor_says_whose_server_refused_it(api, other_install):
    run = start(api)
    run.refresh_from_db()
    assert run.status == "failed"
    assert f"the server at {other_install} refused this install's protocol key (POST /sessions answered 401)" in (
        run.error
    ), run.error
    assert "it belongs to another install, or the key changed" in run.error and "EVAL_SERVER_URL" in run.error
    # the API's status read says the same
    status = api.get(f"/api/evaluation/status?run_id={run.run_id}").json()
    assert "refused this install's protocol key" in status["error"]


def test_an_external_agent_refused_with_its_own_credential_keeps_the_server_s_answer(api, other_install):
    Agent.objects.create(id="outside-tutor", display_name="Outside tutor", kind="protocol", base_url=other_install)
    run = start(api, target="outside-tutor")
    run.refresh_from_db()
    assert run.status == "failed"
    # no protocol key was sent, so nothing is said about it: the server's own answer stands
    assert "POST /sessions answered HTTP 401" in run.error and "protocol key" not in run.error.split("HTTP 401")[0]
    assert "refused this install's protocol key" not in run.error
