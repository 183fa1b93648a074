"""`manage.py check --deploy` refuses the documented placeholder secret key and weak keys, and says how to make one."""

import secrets

import pytest

from tests.test_security_settings import documented_production_environment, run_python


def check_deploy(env: dict[str, str], tmp_path) -> str:
    result = run_python("", env, tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode != 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_documented_placeholder_key_is_refused(tmp_path):
    env = documented_production_environment()
    assert "replace-with" in env["DJANGO_SECRET_KEY"]
    output = check_deploy(env, tmp_path)
    assert "evaluation.deploy.E001" in output
    assert "placeholder" in output
    assert "secrets.token_urlsafe(50)" in output


@pytest.mark.parametrize(
    "key",
    ["short-key-1234", "a" * 60, "django-insecure-" + "Xk3" * 17],
    ids=["short", "one-character", "django-insecure-prefix"],
)
def test_short_or_low_entropy_key_is_refused(tmp_path, key):
    env = {**documented_production_environment(), "DJANGO_SECRET_KEY": key}
    assert "security.W009" in check_deploy(env, tmp_path)


def test_a_made_key_passes(tmp_path):
    env = {**documented_production_environment(), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    result = run_python("", env, tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
