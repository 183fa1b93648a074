"""The CLI's tutor server: its own on a free port, unless told to use one that proves to be this install's.

A second install (another clone, with its own secret key, database and protocol key) left serving at the
configured URL must not take this install's runs: untold, the command starts its own server; told to use
the foreign one, it stops before any run starts and says why.
"""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvaluationRun, TutoringSession
from evaluation.tutoring.server import ForeignServer, check_install, managed_server, tutor_server

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"
FOREIGN = "belongs to another install: its protocol key differs"


@pytest.fixture(scope="module")
def other_install(tmp_path_factory):
    """The app of another install under uvicorn: its own data folder, database, secret key and protocol key."""
    folder = tmp_path_factory.mktemp("other-install")
    env = {
        "EVAL_DATA_DIR": str(folder),
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "DJANGO_SECRET_KEY": "another-install-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "EVAL_PROTOCOL_KEY": "",
        "EVAL_SERVER_URL": "",
    }
    with managed_server(env, log_path=folder / "server.log") as url:
        yield url


@pytest.fixture
def untold(monkeypatch, settings, other_install):
    """This install configured with the other install's URL (as runserver's default port would be), and
    nothing saying to use it."""
    monkeypatch.delenv("EVAL_SERVER_URL", raising=False)
    settings.EVALUATION = {**settings.EVALUATION, "SERVER_URL": other_install}
    return other_install


def cli(**options):
    out = StringIO()
    call_command(
        "run_evaluation", stdout=out, topic_id=TOPIC, provider="offline", persona="ace", max_turns=3, **options
    )
    return out.getvalue()


def test_untold_the_command_starts_its_own_server_and_completes_beside_another_install(catalog, untold):
    out = cli(seed=5)
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    assert "completed" in out and untold not in out
    first = out.splitlines()[0]
    assert first.startswith("Provider") and "tutor" in first and "the server at" not in first
    # the session was created by this install's own server, in this install's database
    session = TutoringSession.objects.get(pk=run.config["session_id"])
    assert session.full_conversation_log
    assert run.config["llm"]["tutor"]["provider"] == "offline"


def test_told_to_use_another_install_s_server_it_stops_before_any_run(catalog, untold):
    with pytest.raises(CommandError, match=FOREIGN) as raised:
        cli(server_url=untold)
    assert untold in str(raised.value) and "starts a tutor server of its own" in str(raised.value)
    assert not EvaluationRun.objects.exists()


@pytest.mark.parametrize("how", ["skip_server", "environment"])
def test_the_configured_url_is_checked_when_told_by_skip_server_or_eval_server_url(catalog, untold, monkeypatch, how):
    if how == "environment":
        monkeypatch.setenv("EVAL_SERVER_URL", untold)
        options = {}
    else:
        options = {"skip_server": True}
    with pytest.raises(CommandError, match=FOREIGN):
        cli(**options)
    assert not EvaluationRun.objects.exists()


def test_this_install_s_server_passes_the_check_and_another_s_does_not(server, other_install):
    check_install(server)
    with pytest.raises(ForeignServer, match=FOREIGN):
        check_install(other_install)


def test_a_batch_that_may_manage_its_server_does_not_use_another_install_s(catalog, other_install):
    with tutor_server(other_install, manage=True) as url:
        assert url != other_install
        check_install(url)
