"""Settings that decide what a stranger can see or do: DEBUG, hosts, the secret key, debug pages,
passwords, and the production environment that `check --deploy` passes."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client, override_settings
from django.urls import path

ROOT = Path(__file__).resolve().parent.parent
REDIS_PASSWORD = "s3cret-redis-pw-9f2c"
REDIS_URL = f"redis://:{REDIS_PASSWORD}@redis.internal:6379/0"


def run_python(code: str, env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Run code (or manage.py when code is empty) in a fresh process whose environment sets none of the
    DJANGO_* production variables unless env does."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EVAL_", "REDIS_", "DATABASE_"))}
    base.update({"DJANGO_SETTINGS_MODULE": "evalproject.settings", "EVAL_DATA_DIR": str(tmp_path)})
    command = [sys.executable, "-c", code] if code else [sys.executable, "manage.py", *args]
    return subprocess.run(command, cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120)


GET_MISSING_PAGE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
response = Client(HTTP_HOST="localhost").get("/no-such-page/")
print(json.dumps({"debug": settings.DEBUG, "hosts": settings.ALLOWED_HOSTS, "status": response.status_code,
                  "body": response.content.decode()}))
"""


def test_debug_is_off_by_default_so_a_404_lists_no_url_patterns(tmp_path):
    result = run_python(GET_MISSING_PAGE, {}, tmp_path)
    assert result.returncode == 0, result.stderr
    page = json.loads(result.stdout)
    assert page["debug"] is False
    assert page["hosts"] == ["localhost", "127.0.0.1", "[::1]", "testserver"]
    assert page["status"] == 404
    # The site's own 404 (its links name admin/ pages), not Django's debug page listing the URLconf.
    assert "URL patterns" not in page["body"] and "Using the URLconf" not in page["body"], page["body"][:500]


def test_debug_is_on_only_when_asked(tmp_path):
    result = run_python(GET_MISSING_PAGE, {"DJANGO_DEBUG": "1"}, tmp_path)
    assert result.returncode == 0, result.stderr
    page = json.loads(result.stdout)
    assert page["debug"] is True and "URL patterns" in page["body"] and "Using the URLconf" in page["body"]


@pytest.mark.parametrize("env", [{"DJANGO_ALLOWED_HOSTS": "eval.example.org"}, {"DJANGO_SECURE": "1"}])
def test_production_without_a_secret_key_refuses_to_start(tmp_path, env):
    result = run_python("", env, tmp_path, "check")
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr, result.stderr[-2000:]


def test_the_embedded_default_starts_without_a_secret_key_and_keeps_its_key(tmp_path):
    show_key = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    first = run_python(show_key, {}, tmp_path)
    second = run_python(show_key, {}, tmp_path)
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip()
    assert len(key) >= 50 and key == second.stdout.strip()  # sessions survive a restart
    assert key != run_python(show_key, {}, tmp_path / "other").stdout.strip()  # each install its own


def explode(request):
    broker = settings.REDIS_URL
    raise ConnectionError(f"cannot reach the broker at {broker}")


urlpatterns = [path("explode/", explode)]


@override_settings(
    ROOT_URLCONF=__name__,
    DEBUG=True,
    REDIS_URL=REDIS_URL,
    Q_CLUSTER={**settings.Q_CLUSTER, "redis": REDIS_URL},
    CHANNEL_LAYERS={"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}},
)
@pytest.mark.parametrize("accept", ["text/html", "text/plain"])
def test_debug_500_page_never_shows_the_redis_password(db, accept):
    client = Client(raise_request_exception=False)
    response = client.get("/explode/", HTTP_ACCEPT=accept)
    body = response.content.decode()
    assert response.status_code == 500
    assert "ConnectionError" in body and "REDIS_URL" in body and "redis.internal" in body  # the debug page itself
    assert REDIS_PASSWORD not in body, [m.start() for m in re.finditer(re.escape(REDIS_PASSWORD), body)]


@pytest.mark.parametrize("weak", ["password", "12345678", "admin123", "staff-member"])
def test_weak_passwords_are_refused(django_user_model, db, weak):
    user = django_user_model(username="staff-member", email="staff-member@example.com")
    with pytest.raises(ValidationError):
        validate_password(weak, user)


def test_a_long_uncommon_passphrase_is_accepted(django_user_model, db):
    validate_password("plum tractor oboe 1987", django_user_model(username="staff-member"))


def test_admin_password_form_refuses_a_weak_password(staff_client, django_user_model):
    other = django_user_model.objects.create_user("reviewer", password="pw-reviewer-123")
    response = staff_client.post(
        f"/admin/auth/user/{other.pk}/password/", {"password1": "admin123", "password2": "admin123"}
    )
    assert response.status_code == 200  # the form again, with its errors
    assert "This password is too short" in response.content.decode()
    other.refresh_from_db()
    assert other.check_password("pw-reviewer-123")


def documented_production_environment() -> dict[str, str]:
    """The NAME=value lines of the production environment block in docs/deployment.md."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    block = re.search(r"<!-- production-environment -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert block, "docs/deployment.md: no ``` block after <!-- production-environment -->"
    env = {}
    for line in block.group(1).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    return env


def test_documented_production_environment_passes_check_deploy(tmp_path):
    env = documented_production_environment()
    assert {"DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "DJANGO_SECURE"} <= env.keys()
    env["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(64)
    result = run_python("", env, tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
