"""A client generated from the schema (openapi-python-client) drives a real run over HTTP, typed end to end."""

import importlib
import subprocess
import sys
import time
from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """\
package_name_override: evalclient
post_hooks: []
content_type_overrides:
  application/x-ndjson: application/octet-stream
"""


@pytest.fixture
def evalclient(tmp_path, monkeypatch):
    """The client package, generated into tmp_path from the schema the app serves (no network)."""
    schema = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema), stdout=StringIO())
    (tmp_path / "config.yaml").write_text(CONFIG)
    generated = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(schema),
            "--meta",
            "none",
            "--config",
            str(tmp_path / "config.yaml"),
            "--output-path",
            str(tmp_path / "evalclient"),
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "evalclient" or m.startswith("evalclient.")]:
        del sys.modules[name]
    return importlib.import_module("evalclient")


def test_generated_client_starts_a_run_polls_it_and_reads_it(evalclient, live_server, server, q_sync, token):
    from evalclient.api.runs import runs_retrieve, runs_status_retrieve
    from evalclient.api.tutoring import evaluation_start
    from evalclient.models import Error, RunDetailOutput, RunStatusEnum, RunStatusOutput, StartInput, StartOutput

    client = evalclient.AuthenticatedClient(base_url=live_server.url, token=token.key, prefix="Token", timeout=60)
    started = evaluation_start.sync(
        client=client,
        body=StartInput(topic_id="comparing-decimals", persona_file="ace", max_turns=3, seed=11, provider="offline"),
    )
    assert isinstance(started, StartOutput), started
    assert started.run_ids == [started.run_id] and started.group is None

    deadline = time.monotonic() + 30
    while True:
        status = runs_status_retrieve.sync(client=client, run_id=started.run_id)
        assert isinstance(status, RunStatusOutput), status
        if status.run_status not in (RunStatusEnum.QUEUED, RunStatusEnum.RUNNING) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status.run_status == RunStatusEnum.COMPLETED, status.error
    assert status.status.value == "completed" and 1 <= status.turn <= 3 and status.error is None

    detail = runs_retrieve.sync(client=client, run_id=started.run_id)
    assert isinstance(detail, RunDetailOutput), detail
    assert detail.persona_id == "ace" and detail.topic_id == "comparing-decimals"
    assert detail.messages[0].role == "tutor" and detail.message_count == len(detail.messages)
    assert detail.evaluation is not None and detail.evaluation.offline is True
    assert set(detail.evaluation.scores.to_dict()) == set(detail.scores.to_dict()) and len(detail.scores.to_dict()) == 5

    # An error reaches the client as the one documented error shape, typed too.
    missing = runs_retrieve.sync(client=client, run_id="run_nope")
    assert isinstance(missing, Error) and missing.error == "run: no run 'run_nope'"
    anonymous = evalclient.Client(base_url=live_server.url)
    refused = runs_retrieve.sync_detailed(client=anonymous, run_id=started.run_id)
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Token"
