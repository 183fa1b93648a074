"""The first minutes of an API user: where / leads, what an anonymous request hears, the docs pages."""

import pytest
from django.contrib.staticfiles import finders
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_root_leads_to_the_dashboard_then_the_login(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/admin/evaluation/"
    dashboard = client.get(response["Location"])
    assert dashboard.status_code == 302 and dashboard["Location"].startswith("/admin/login/")


def operations():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, item in schema["paths"].items():
        for method in item:
            yield method, path.replace("{suite_id}", "1").replace("{queue_id}", "1").replace("{", "x").replace("}", "")


def test_every_operation_answers_anonymous_requests_401_with_the_scheme(anonymous):
    seen = 0
    for method, path in operations():
        response = getattr(anonymous, method)(path, {}, format="json") if method == "post" else anonymous.get(path)
        assert response.status_code == 401, (method, path, response.status_code)
        assert response["WWW-Authenticate"] == "Token", (method, path)
        assert response.json() == {"error": "Authentication credentials were not provided."}
        seen += 1
    assert seen >= 24


def test_a_bad_token_is_401_and_a_non_staff_user_is_403(django_user_model):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = client.get("/api/evaluation/runs")
    assert response.status_code == 401 and response.json()["error"] == "Invalid token."
    user = django_user_model.objects.create_user("viewer", password="pw-viewer-123")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    response = client.get("/api/evaluation/runs")
    assert response.status_code == 403 and "permission" in response.json()["error"]


def test_swagger_ui_and_redoc_load_their_assets_from_this_server(client):
    swagger = client.get("/api/docs/")
    html = swagger.content.decode()
    assert swagger.status_code == 200 and "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn.jsdelivr.net" not in html and "<script>" not in html  # no inline script: a strict CSP can load it
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and "/api/schema/" in script.content.decode()
    redoc = client.get("/api/redoc/")
    assert redoc.status_code == 200 and "/api/redoc/redoc.standalone.js" in redoc.content.decode()
    # the bundle is the sidecar's, served with its menu's logo turned from the CDN's into this site's
    bundle = client.get("/api/redoc/redoc.standalone.js")
    assert bundle.status_code == 200 and bundle["Content-Type"].startswith("text/javascript")
    assert b"cdn.redoc.ly" not in bundle.content and b"/static/favicon.svg" in bundle.content
    for asset in ("swagger-ui-dist/swagger-ui-bundle.js", "redoc/bundles/redoc.standalone.js"):
        assert finders.find(f"drf_spectacular_sidecar/{asset}"), asset


def test_schema_is_served_to_anyone(client):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200 and "/api/evaluation/start" in response.json()["paths"]


@pytest.mark.parametrize("path", ["/api/suites/null%2Cnull", "/api/suites/1/nothing", "/api/no-such-operation"])
def test_a_path_no_operation_matches_answers_404_in_json(api, path):
    """Django's converter refusing `null,null` as a suite id is still the API's answer: JSON, not a page."""
    response = api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"].startswith("no API operation at /api/")


def test_outside_the_api_a_missing_page_is_an_html_page(client):
    response = client.get("/no-such-page")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_query_parameter_sent_twice_is_refused_naming_it(api):
    response = api.get("/api/evaluation/runs?status=failed&status=completed")
    assert response.status_code == 400
    assert response.json()["fields"] == {"status": ["given 2 times; send it once"]}
