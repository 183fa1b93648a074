"""Keys go only where they belong: a vendor's key to its own endpoint, never to a URL someone typed."""

import pytest
from django.urls import reverse

from evaluation.models import Agent, EndpointCredential
from evaluation.providers import Message, ProviderSpec, get_llm
from evaluation.providers.base import MissingKeyError
from evaluation.providers.registry import build

pytestmark = pytest.mark.django_db


def sent_key(loopback, endpoint):
    headers = [r.headers for r in loopback.requests if r.endpoint == endpoint][-1]
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


@pytest.mark.parametrize("vendor,endpoint", [("openai", "chat"), ("anthropic", "messages")])
def test_a_typed_base_url_never_receives_the_environments_key(loopback, vendor, endpoint):
    url = loopback.openai_url if vendor == "openai" else loopback.anthropic_url
    get_llm("judge", override=f"{vendor}/m@{url}").call([Message("user", "hi")])
    assert sent_key(loopback, endpoint) == "none"
    assert "test-loopback" not in str(loopback.requests[-1].headers)


def test_a_stored_credential_goes_to_its_own_url_only(loopback, admin_client):
    url = loopback.openai_url
    admin_client.post(
        reverse("admin:evaluation_endpointcredential_add"), {"base_url": url, "api_key": "sk-for-this-url"}
    )
    assert EndpointCredential.objects.get(base_url=url).api_key == "sk-for-this-url"
    get_llm("judge", override=f"openai/m@{url}").call([Message("user", "hi")])
    assert sent_key(loopback, "chat") == "sk-for-this-url"
    page = admin_client.get(
        reverse("admin:evaluation_endpointcredential_change", args=[EndpointCredential.objects.get().pk])
    )
    assert page.status_code == 200 and b"sk-for-this-url" not in page.content  # write-only


def test_a_named_variable_is_sent_only_when_the_allow_list_says_so(loopback, monkeypatch, settings):
    monkeypatch.setenv("LOCAL_LLM_KEY", "sk-local")
    spec = ProviderSpec("openai", "m", loopback.openai_url, {"key_env": "LOCAL_LLM_KEY"})
    with pytest.raises(MissingKeyError, match="LOCAL_LLM_KEY may not be sent to .* EVAL_ALLOWED_KEY_VARS"):
        get_llm("judge", override=spec).call([Message("user", "hi")])
    settings.EVALUATION = {**settings.EVALUATION, "ALLOWED_KEY_VARS": ["LOCAL_LLM_KEY"]}
    get_llm("judge", override=spec).call([Message("user", "hi")])
    assert sent_key(loopback, "chat") == "sk-local"


def test_the_vendors_own_endpoint_gets_its_key(loopback, monkeypatch):
    # The operator moves the vendor's endpoint in the environment (a proxy): that is the vendor's endpoint.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.anthropic_url)
    get_llm("judge", override="anthropic/claude-sonnet-4-6").call([Message("user", "hi")])
    assert sent_key(loopback, "messages") == "sk-ant-test-loopback"


def test_custom_hosts_can_be_restricted(settings, staff_client, catalog):
    settings.EVALUATION = {**settings.EVALUATION, "ALLOWED_BASE_URL_HOSTS": ["llm.internal"]}
    assert ProviderSpec.parse("openai/m@http://llm.internal/v1").base_url == "http://llm.internal/v1"
    with pytest.raises(ValueError, match="host 'evil.example' is not in EVAL_ALLOWED_BASE_URL_HOSTS"):
        ProviderSpec.parse("openai/m@http://evil.example/v1")
    response = staff_client.post(
        "/api/evaluation/start",
        {"topic_id": "comparing-decimals", "persona_file": "ace", "provider": "openai/m@http://evil.example/v1"},
        content_type="application/json",
    )
    assert response.status_code == 400 and "EVAL_ALLOWED_BASE_URL_HOSTS" in response.json()["error"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9\\@llm.internal/v1",  # urllib3 ends the host at the backslash: 127.0.0.1
        "http://127.0.0.1:9 @llm.internal/v1",
        "http://llm.internal\t/v1",
    ],
)
def test_a_base_url_read_two_ways_is_refused_before_anything_is_sent(settings, url):
    settings.EVALUATION = {**settings.EVALUATION, "ALLOWED_BASE_URL_HOSTS": ["llm.internal"]}
    with pytest.raises(ValueError, match="a base URL may not contain"):
        ProviderSpec.parse(f"openai/m@{url}")
    with pytest.raises(MissingKeyError, match="a base URL may not contain"):
        build(ProviderSpec("openai", "m", url, {"api": "chat"}))


@pytest.mark.parametrize("url", ["http://[::1]:8000/v1", "http://LLM.Internal:8000/v1", "https://u:p@llm.internal/v1"])
def test_plain_base_urls_still_pass(url):
    assert ProviderSpec.parse(f"openai/m@{url}").base_url == url


def test_an_agents_auth_header_may_name_only_allowed_variables(admin_client, settings, catalog):
    form = {"id": "ext", "display_name": "External", "kind": "protocol", "base_url": "http://127.0.0.1:9/"}
    response = admin_client.post(reverse("admin:evaluation_agent_add"), {**form, "auth_header": "DJANGO_SECRET_KEY"})
    assert response.status_code == 200 and b"DJANGO_SECRET_KEY is not in EVAL_ALLOWED_KEY_VARS" in response.content
    assert not Agent.objects.filter(pk="ext").exists()

    # An agent stored before the rule (or edited in the database) still cannot send it: the run fails first.
    Agent.objects.create(**form, auth_header="DJANGO_SECRET_KEY")
    from evaluation.tutoring import services

    (run,) = services.run_start(topic_id="comparing-decimals", persona="ace", agent_id="ext", enqueue=False)
    services.run_execute(run.pk, run.attempt)
    run.refresh_from_db()
    assert run.status == "failed" and "DJANGO_SECRET_KEY may not be sent to agent ext" in run.error
