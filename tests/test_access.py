"""Who may use which door: one table of every API operation and dashboard page, tried with every role.

A new URL under /api/ or the dashboard fails test_every_door_has_a_row until it is added here with
the permission it needs, so no endpoint goes out open by accident.
"""

import json

import pytest
from django.contrib.auth.models import Group
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.authtoken.models import Token

from evaluation.models import Agent, EvaluationRun, Suite

pytestmark = pytest.mark.django_db

RUN = {"run_id": "run_access"}
QUEUE = {"queue_id": 1}
PUBLIC = "public"
# (url name, method, kwargs, body, permission it needs; PUBLIC = anyone, the API's documentation)
DOORS = [
    ("api-evaluation-start", "post", {}, {"topic_id": "comparing-decimals", "persona_file": "ace"}, "start_run"),
    ("api-evaluation-status", "get", {}, None, "view_evaluationrun"),
    ("api-evaluation-runs", "get", {}, None, "view_evaluationrun"),
    ("api-evaluation-runs-export", "get", {}, None, "view_evaluationrun"),
    ("api-evaluation-run", "get", RUN, None, "view_evaluationrun"),
    ("api-evaluation-run-status", "get", RUN, None, "view_evaluationrun"),
    ("api-evaluation-retry", "post", RUN, {}, "retry_run"),
    ("api-run-retry", "post", RUN, {}, "retry_run"),
    ("api-run-cancel", "post", RUN, {}, "cancel_run"),
    ("api-evaluation-session", "post", {}, {"session_id": "00000000-0000-0000-0000-000000000000"}, "start_run"),
    ("api-drift-ingest", "post", {}, [], "add_agentmessage"),
    ("api-drift-evaluate", "post", {"agent_id": "rex"}, {}, "start_run"),
    ("api-drift-gate", "post", {"agent_id": "rex"}, {"text": "hi", "channel": "general"}, "use_corrections"),
    ("api-drift-pre-invocation", "post", {"agent_id": "rex"}, {"channel": "general"}, "use_corrections"),
    ("api-suites", "get", {}, None, "view_suite"),
    ("api-suite", "get", {"suite_id": 1}, None, "view_suite"),
    ("api-suite-run", "post", {"suite_id": 1}, {}, "start_run"),
    ("api-suite-run-detail", "get", RUN, None, "view_evaluationrun"),
    ("api-topics", "get", {}, None, "view_topic"),
    ("api-topic", "get", {"topic_id": "comparing-decimals"}, None, "view_topic"),
    ("api-personas", "get", {}, None, "view_persona"),
    ("api-persona", "get", {"persona_id": "ace"}, None, "view_persona"),
    ("api-agents", "get", {}, None, "view_agent"),
    ("api-agent", "get", {"agent_id": "rex"}, None, "view_agent"),
    ("api-judging-import", "post", {}, [], "add_transcript"),
    ("api-judging-agreement", "get", {}, None, "view_judgescore"),
    ("api-judging-estimates", "get", {}, None, "view_judgescore"),
    ("api-judging-jobs", "post", {}, {}, "add_transcript"),
    ("api-judging-queues", "get", {}, None, "view_labelqueue"),
    ("api-judging-queues", "post", {}, {}, "add_labelqueue"),
    ("api-judging-queue", "get", QUEUE, None, "view_labelqueue"),
    ("api-judging-queue-items", "post", QUEUE, {}, "add_labelqueue"),
    ("api-judging-queue-people", "post", QUEUE, {}, "add_labelqueue"),
    ("api-judging-queue-next", "post", QUEUE, {}, "add_annotation"),
    ("api-judging-queue-labels", "post", QUEUE, {}, "add_annotation"),
    ("api-judging-queue-labels", "get", QUEUE, None, "view_labelqueue"),
    ("api-judging-queue-adjudications", "post", QUEUE, {}, "add_annotation"),
    ("api-evaluation-comparison", "get", {"group": "comparison_x"}, None, "view_evaluationrun"),
    ("api-tutoring-realism", "get", {}, None, "view_evaluationrun"),
    ("api-index", "get", {}, None, PUBLIC),
    ("api-docs", "get", {}, None, PUBLIC),
    ("api-redoc", "get", {}, None, PUBLIC),
    ("api-redoc-bundle", "get", {}, None, PUBLIC),
    ("schema", "get", {}, None, PUBLIC),
    ("evaluation-dashboard", "get", {}, None, "view_evaluationrun"),
    ("evaluation-charts", "get", {}, None, "view_evaluationrun"),
    ("evaluation-start", "post", {}, {"topic_id": "comparing-decimals", "personas": "ace"}, "start_run"),
    ("evaluation-runs-status", "get", {}, None, "view_evaluationrun"),
    ("evaluation-run-report", "get", RUN, None, "view_evaluationrun"),
    ("evaluation-run-live", "get", RUN, None, "view_evaluationrun"),
    ("evaluation-run-file", "get", {**RUN, "name": "review.md"}, None, "view_evaluationrun"),
    ("evaluation-run-retry", "post", RUN, {}, "retry_run"),
    ("evaluation-run-again", "post", RUN, {}, "start_run"),
    ("evaluation-run-cancel", "post", RUN, {}, "cancel_run"),
    ("evaluation-run-labels", "post", RUN, {}, "add_annotation"),
    ("evaluation-comparison", "get", {"group": "comparison_x"}, None, "view_evaluationrun"),
    ("evaluation-suite-run", "get", RUN, None, "view_evaluationrun"),
    ("evaluation-drift-index", "get", {}, None, "view_evaluationrun"),
    ("evaluation-drift-agent", "get", {"agent_id": "rex"}, None, "view_evaluationrun"),
    ("evaluation-realism", "get", {}, None, "view_evaluationrun"),
    ("evaluation-judging", "get", {}, None, "view_judgescore"),
    ("evaluation-judging-import", "post", {}, {}, "add_transcript"),
    ("evaluation-judge-card", "get", {"configuration_id": 1}, None, "view_judgescore"),
    ("evaluation-transcript", "get", {"transcript_id": 1}, None, "view_transcript"),
    ("evaluation-queue-from-card", "post", {"configuration_id": 1}, {}, "add_labelqueue"),
    ("evaluation-queues", "get", {}, None, "view_labelqueue"),
    ("evaluation-queue", "get", QUEUE, None, "view_labelqueue"),
    ("evaluation-queue-label", "get", QUEUE, None, "add_annotation"),
    ("evaluation-queue-adjudicate", "post", QUEUE, {}, "add_annotation"),
    ("evaluation-queue-export", "get", {**QUEUE, "fmt": "csv"}, None, "view_labelqueue"),
]
# "viewer_not_staff": in the viewer group without is_staff; the API and the dashboard are for staff only.
ROLES = ["anonymous", "signed_in", "viewer_not_staff", "staff_no_perms", "viewer", "operator", "superuser"]
VIEWER = {
    "view_evaluationrun",
    "view_suite",
    "view_topic",
    "view_persona",
    "view_agent",
    "view_judgescore",
    "view_transcript",
    "view_labelqueue",
}
OPERATOR = VIEWER | {
    "add_labelqueue",
    "start_run",
    "retry_run",
    "cancel_run",
    "use_corrections",
    "add_agentmessage",
    "add_transcript",
    "add_annotation",
}


def expected(role: str, perm: str, api: bool) -> str:
    if perm == PUBLIC or role == "superuser":
        return "allowed"
    if role == "anonymous":
        return "login"
    if not api and role in ("signed_in", "viewer_not_staff"):
        return "login"  # the dashboard lives in the admin: staff only
    if role == "viewer_not_staff":
        return "refused"  # the API: staff only, whatever the groups
    held = {"viewer": VIEWER, "operator": OPERATOR}.get(role, set())
    return "allowed" if perm in held else "refused"


def outcome(response, api: bool) -> str:
    if response.status_code == 401 or (response.status_code == 302 and "/login/" in response["Location"]):
        return "login"
    if response.status_code == 403 and api and not response.has_header("WWW-Authenticate"):
        return "refused"
    if response.status_code == 403:
        return "refused"
    return "allowed"


@pytest.fixture
def world(catalog, django_user_model):
    EvaluationRun.objects.create(run_id="run_access", status="completed", stage="completed")
    Suite.objects.create(pk=1, path="skills/greeter/EVAL.md", name="greeter")
    assert Agent.objects.filter(pk="rex").exists()
    users = {
        "signed_in": django_user_model.objects.create_user("plain", password="x" * 16),
        "viewer_not_staff": django_user_model.objects.create_user("outsider", password="x" * 16),
        "staff_no_perms": django_user_model.objects.create_user("staffer", password="x" * 16, is_staff=True),
        "viewer": django_user_model.objects.create_user("viewer", password="x" * 16, is_staff=True),
        "operator": django_user_model.objects.create_user("operator", password="x" * 16, is_staff=True),
        "superuser": django_user_model.objects.create_superuser("root", password="x" * 16),
    }
    users["viewer"].groups.add(Group.objects.get(name="viewer"))
    users["viewer_not_staff"].groups.add(Group.objects.get(name="viewer"))
    users["operator"].groups.add(Group.objects.get(name="operator"))
    return users


def call(client, door, user):
    name, method, kwargs, body, _ = door
    url = reverse(name, kwargs=kwargs)
    api = url.startswith("/api/")
    extra = {}
    if user is not None:
        if api:
            extra["HTTP_AUTHORIZATION"] = f"Token {Token.objects.get_or_create(user=user)[0].key}"
        else:
            client.force_login(user)
    if method == "get":
        return client.get(url, **extra), api
    if api:
        return client.post(url, json.dumps(body), content_type="application/json", **extra), api
    return client.post(url, body or {}, **extra), api


def test_every_role_at_every_door(client, world):
    seen = []
    for role in ROLES:
        for door in DOORS:
            client.logout()
            response, api = call(client, door, world.get(role))
            got, want = outcome(response, api), expected(role, door[4], api)
            seen.append((role, door[0], want, got, response.status_code))
    wrong = [s for s in seen if s[2] != s[3]]
    print(f"\naccess table: {len(DOORS)} doors x {len(ROLES)} roles = {len(seen)} checks")
    assert not wrong, "\n".join(f"{r} at {d}: expected {w}, got {g} (HTTP {c})" for r, d, w, g, c in wrong)
    assert sum(1 for s in seen if s[3] == "allowed") > len(DOORS)  # the table is not all refusals


def _names(resolver, prefix=""):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue  # the Django admin checks model permissions on its own pages
            yield from _names(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and entry.name:
            yield prefix + str(entry.pattern), entry.name


def test_every_door_has_a_row():
    doors = {name for path, name in _names(get_resolver()) if path.startswith(("api/", "admin/evaluation/"))}
    missing = doors - {d[0] for d in DOORS}
    assert not missing, f"add these to the access table with the permission they need: {sorted(missing)}"


def test_runs_record_who_started_and_changed_them(client, world):
    token = Token.objects.create(user=world["operator"])
    auth = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    response = client.post(
        "/api/evaluation/start",
        json.dumps({"topic_id": "comparing-decimals", "persona_file": "ace"}),
        content_type="application/json",
        **auth,
    )
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert run.started_by == world["operator"]
    client.post(f"/api/evaluation/runs/{run.run_id}/cancel", **auth)
    assert list(run.events.values_list("status", "actor")) == [
        ("queued", "user:operator"),
        ("cancelled", "user:operator"),
    ]


def test_credentials_in_urls_and_server_paths_stay_out_of_the_api(client, world, settings, tmp_path):
    run = EvaluationRun.objects.get(run_id="run_access")
    run.config = {"provider": "openai/m@http://alice:s3cret@llm.internal/v1"}
    run.artifacts_dir = str(tmp_path / "run_access")
    run.save()
    (tmp_path / "run_access").mkdir()
    (tmp_path / "run_access" / "review.md").write_text("# review")
    token = Token.objects.create(user=world["viewer"])
    body = client.get("/api/evaluation/runs/run_access", HTTP_AUTHORIZATION=f"Token {token.key}").json()
    assert body["config"]["provider"] == "openai/m@http://***@llm.internal/v1"
    assert "s3cret" not in json.dumps(body) and str(tmp_path) not in json.dumps(body)
    assert body["files"] == ["review.md"]


def test_a_user_who_is_not_staff_is_refused_the_api_with_the_reason(client, world):
    token = Token.objects.create(user=world["viewer_not_staff"])
    assert world["viewer_not_staff"].has_perm("evaluation.view_evaluationrun")
    response = client.get("/api/evaluation/runs", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 403
    assert "is_staff" in json.dumps(response.json())
