"""The import and labelling doors: the API, the admin upload and the admin's label form share one service."""

import json

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token

from evaluation.models import Annotation, Item, Transcript

pytestmark = pytest.mark.django_db

RECORD = {
    "id": "t-1",
    "messages": [{"role": "tutor", "content": "What is 2+2?"}, {"role": "student", "content": "5"}],
    "labels": {"pacing": 4},
}


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("op", password="x" * 16, is_staff=True)
    user.groups.add(Group.objects.get(name="operator"))
    return user


def test_api_import_of_json_lines_then_an_error_naming_line_and_field(client, operator):
    auth = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=operator).key}"}
    body = json.dumps(RECORD) + "\n" + json.dumps(dict(RECORD, id="t-2"))
    response = client.post(
        "/api/judging/import?input_format=jsonl&file=class.jsonl", body, content_type="application/x-ndjson", **auth
    )
    assert response.status_code == 201, response.content
    assert response.json() | {"rubrics": None} == {
        "file": "class.jsonl",
        "format": "jsonl",
        "rubrics": None,
        "created": 2,
        "updated": 0,
        "unchanged": 0,
        "items": 2,
        "labels": 2,
        "sources": ["class"],
        "merged": 0,
        "rejected": [],
    }
    bad = json.dumps(dict(RECORD, id="t-3", labels={"pacing": "fast"}))
    response = client.post(
        "/api/judging/import?input_format=jsonl", f"{body}\n{bad}", content_type="text/plain", **auth
    )
    assert response.status_code == 400
    error = response.json()
    assert "line 3" in error["error"] and "'fast' is not on the scale of tutor-session.pacing" in error["error"]
    assert list(error["fields"]) == ["record 2 (id 't-3').labels.pacing"]
    assert Transcript.objects.count() == 2
    response = client.post("/api/judging/import?input_format=xml", body, content_type="text/plain", **auth)
    assert response.status_code == 400 and "input_format" in response.json()["fields"]
    response = client.post(
        "/api/judging/import?rubric=nope&input_format=jsonl", body, content_type="text/plain", **auth
    )
    assert response.status_code == 404 and "no rubric 'nope'" in response.json()["error"]


def test_admin_upload_imports_a_file_and_shows_every_problem(client, operator):
    client.force_login(operator)
    page = client.get("/admin/evaluation/transcript/")
    assert b"Import transcripts" in page.content
    upload = SimpleUploadedFile("bad.json", json.dumps([dict(RECORD, labels={"pacing": 0})]).encode())
    response = client.post("/admin/evaluation/transcript/upload/", {"file": upload, "format": "auto"})
    assert response.status_code == 200
    assert "bad.json: record 0 (id &#x27;t-1&#x27;).labels.pacing: 0 is not on the scale" in response.content.decode()
    assert not Transcript.objects.exists()
    upload = SimpleUploadedFile("good.json", json.dumps([RECORD]).encode())
    response = client.post(
        "/admin/evaluation/transcript/upload/", {"file": upload, "format": "json", "annotator": "kim"}
    )
    assert response.status_code == 302
    assert Annotation.objects.get().annotator == "kim"


def test_admin_upload_is_refused_without_the_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user("v", password="x" * 16, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    assert client.get("/admin/evaluation/transcript/upload/").status_code == 403


def test_staff_label_an_item_in_the_admin_each_as_themselves(client, operator, django_user_model):
    from evaluation.judging import services

    services.transcripts_import(json.dumps([RECORD]), file="x.json")
    item = Item.objects.get()
    other = django_user_model.objects.create_user("op2", password="x" * 16, is_staff=True)
    other.groups.add(Group.objects.get(name="operator"))
    pacing = item.annotations.get().dimension
    for user, value in ((operator, "7"), (other, "9")):
        client.force_login(user)
        page = client.get(f"/admin/evaluation/item/{item.pk}/change/")
        assert page.status_code == 200 and f"label_{pacing.pk}".encode() in page.content
        inline = {"annotations-TOTAL_FORMS": "0", "annotations-INITIAL_FORMS": "0"}  # as the page's form sends it
        response = client.post(f"/admin/evaluation/item/{item.pk}/change/", {f"label_{pacing.pk}": value, **inline})
        assert response.status_code == 302, response.content.decode()[:2000]
    labels = sorted(item.annotations.values_list("annotator", "value", "user__username"))
    assert labels == [("op", "7", "op"), ("op2", "9", "op2"), ("x", "4", None)]


def test_dashboard_upload_shares_the_import_and_names_the_problems(client, operator):
    client.force_login(operator)
    assert b'id="import-form"' in client.get("/admin/evaluation/judging/").content
    bad = SimpleUploadedFile("bad.jsonl", (json.dumps(RECORD) + "\n" + json.dumps({"id": "t-9"})).encode())
    page = client.post(
        "/admin/evaluation/judging/import", {"file": bad, "format": "jsonl"}, follow=True
    ).content.decode()
    assert "Nothing was imported: bad.jsonl:2: record 1 (id &#x27;t-9&#x27;).messages: is required" in page
    assert not Transcript.objects.exists()
    good = SimpleUploadedFile("good.jsonl", json.dumps(RECORD).encode())
    page = client.post(
        "/admin/evaluation/judging/import", {"file": good, "format": "jsonl"}, follow=True
    ).content.decode()
    assert "Imported good.jsonl (jsonl): 1 created" in page and Transcript.objects.count() == 1
    page = client.post("/admin/evaluation/judging/import", {"format": "jsonl"}, follow=True).content.decode()
    assert "Choose a file to import." in page
