"""Files no column can hold, at every import door (the API, the admin and dashboard uploads, the command):
an over-long `# annotator:` line, a lone surrogate, a 5,000-digit number. Each is refused naming the line
or field and the reason, and nothing is stored."""

import json

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from evaluation.models import Annotation, Transcript

pytestmark = pytest.mark.django_db

LONG_ANNOTATOR = ("long.txt", "# annotator: " + "a" * 200 + "\n# label pacing: 4\nTutor: hi\nStudent: 5\n")
SURROGATE = ("bad.json", '[{"id": "t", "messages": [{"role": "tutor", "content": "\\udfff"}]}]')
LONG_NUMBER = (
    "num.jsonl",
    json.dumps({"id": "t", "messages": [{"role": "tutor", "content": "x"}]})[:-1]
    + ', "labels": {"pacing": '
    + "9" * 5000
    + "}}",
)
CASES = [
    pytest.param(*LONG_ANNOTATOR, "annotator: is 200 characters: at most 150", id="annotator"),
    pytest.param(*SURROGATE, "messages[0].content: holds a lone surrogate", id="surrogate"),
    pytest.param(*LONG_NUMBER, "labels.pacing: is a number of 5000 digits", id="number"),
]


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("op", password="x" * 16, is_staff=True)
    user.groups.add(Group.objects.get(name="operator"))
    return user


def nothing_stored():
    assert not Transcript.objects.exists() and not Annotation.objects.exists()


@pytest.mark.parametrize(("name", "body", "reason"), CASES)
def test_api(client, operator, name, body, reason):
    auth = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=operator).key}"}
    response = client.post(f"/api/judging/import?file={name}", body, content_type="text/plain", **auth)
    assert response.status_code == 400 and reason in response.json()["error"], response.content[:400]
    nothing_stored()


@pytest.mark.parametrize(("name", "body", "reason"), CASES)
def test_admin_upload(client, operator, name, body, reason):
    client.force_login(operator)
    upload = SimpleUploadedFile(name, body.encode())
    response = client.post("/admin/evaluation/transcript/upload/", {"file": upload, "format": "auto"})
    assert response.status_code == 200 and reason in response.content.decode()
    nothing_stored()


@pytest.mark.parametrize(("name", "body", "reason"), CASES)
def test_dashboard_upload(client, operator, name, body, reason):
    client.force_login(operator)
    upload = SimpleUploadedFile(name, body.encode())
    page = client.post("/admin/evaluation/judging/import", {"file": upload, "format": "auto"}, follow=True)
    assert page.status_code == 200 and reason in page.content.decode()
    nothing_stored()


@pytest.mark.parametrize(("name", "body", "reason"), CASES)
def test_command(tmp_path, capsys, name, body, reason):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_transcripts", str(path))
    assert reason in capsys.readouterr().err
    nothing_stored()


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("annotator", "a" * 151, "at most 150"),
        ("source", "\udfff", "lone surrogate"),
        ("source", "s" * 101, "at most 100"),
    ],
)
def test_command_options_are_checked_too(tmp_path, capsys, option, value, reason):
    path = tmp_path / "ok.txt"
    path.write_text("Tutor: hi\nStudent: 5\n", encoding="utf-8")
    with pytest.raises(CommandError):
        call_command("import_transcripts", str(path), f"--{option}={value}")
    assert reason in capsys.readouterr().err
    nothing_stored()
