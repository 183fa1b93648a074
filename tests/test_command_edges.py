"""Commands refuse what cannot work with one line that says why, never a traceback or a silent success."""

import socket

import pytest
from django.core.management import CommandError, call_command


def test_loopback_llm_on_a_busy_port_names_the_port_and_the_way_out():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=rf"cannot listen on 127.0.0.1:{port}: .*--port 0"):
            call_command("loopback_llm", "--port", str(port))


@pytest.mark.parametrize(
    ("flag", "value", "reason"),
    [
        ("--latency", "-1", "must be 0 or more"),
        ("--latency", "nan", "must be 0 or more"),
        ("--fault-rate", "1.5", "between 0 and 1"),
        ("--port", "70000", "between 0 and 65535"),
    ],
)
def test_loopback_llm_refuses_impossible_numbers(flag, value, reason):
    with pytest.raises(CommandError, match=reason):
        call_command("loopback_llm", f"{flag}={value}")


@pytest.mark.django_db
def test_discover_suites_of_a_folder_that_does_not_exist_fails(tmp_path):
    with pytest.raises(CommandError, match="no such file or folder: .*nowhere"):
        call_command("discover_suites", str(tmp_path / "nowhere"))
