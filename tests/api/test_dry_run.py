"""A price before the run: the API's dry_run and the CLI's --dry-run price the work and start nothing."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvaluationRun
from evaluation.tutoring.services import run_forecast

GPT = {"input": 1.75, "output": 14.0}  # prices/vendors.yaml, gpt-5.2 (USD per million tokens)


@pytest.fixture
def prices(db):
    call_command("load_prices", stdout=StringIO())


def test_dry_run_answers_the_price_and_starts_nothing(staff_client, catalog, prices, loopback):
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    body = {"topic_id": "comparing-decimals", "persona_file": "all", "max_turns": 6, "provider": provider}
    answer = staff_client.post("/api/evaluation/start", {**body, "dry_run": True}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    found = answer.json()
    assert found["dry_run"] is True
    assert EvaluationRun.objects.count() == 0 and loopback.count() == 0  # nothing created, nothing sent

    personas = 8
    roles = {r["role"]: r for r in found["roles"]}
    assert roles["simulator"]["calls"] == personas * 6 and roles["judge"]["calls"] == personas
    assert roles["simulator"]["model"] == "gpt-5.2" and found["unpriced"] == []
    # The price, worked from the tokens it reports at gpt-5.2's prices: input and output apart, batch at half.
    for role in roles.values():
        if role["free"]:
            continue
        for end in ("low", "high"):
            tokens = role["input_tokens"][end] * GPT["input"] + role["output_tokens"][end] * GPT["output"]
            assert role["direct_usd"][end] == pytest.approx(tokens / 1e6, abs=1e-6)
            assert role["batch_usd"][end] == pytest.approx(tokens / 2e6, abs=1e-6)
    assert found["direct_usd"]["low"] == pytest.approx(sum(r["direct_usd"]["low"] for r in roles.values()), abs=1e-5)
    assert found["direct_usd"]["low"] < found["direct_usd"]["high"]
    assert found["batch_usd"]["high"] == pytest.approx(found["direct_usd"]["high"] / 2, abs=1e-5)
    assert "direct $" in found["text"] and "by batch $" in found["text"]


def test_the_price_grows_with_the_prompts_and_the_turns(catalog, prices):
    # Built from the real prompts: a longer conversation carries more input on every call.
    short = run_forecast(topic_id="comparing-decimals", persona="ace", max_turns=4, provider="openai")
    long = run_forecast(topic_id="comparing-decimals", persona="ace", max_turns=8, provider="openai")
    assert long.calls == 2 * 8 + 1 and short.calls == 2 * 4 + 1
    sim_input = {f.lines[0].calls: f.lines[0].input_tokens[0] for f in (short, long)}
    assert sim_input[8] > 2 * sim_input[4]  # each call carries the conversation so far: input grows faster
    assert long.direct_usd[0] > short.direct_usd[0]
    assert EvaluationRun.objects.count() == 0


def test_an_unpriced_model_is_named_not_priced_as_free(staff_client, catalog, prices, loopback):
    provider = f"openai/mystery-7b@{loopback.openai_url}"
    body = {"topic_id": "comparing-decimals", "persona_file": "ace", "provider": provider, "dry_run": True}
    found = staff_client.post("/api/evaluation/start", body, content_type="application/json").json()
    assert found["unpriced"] == ["mystery-7b"]
    assert {r["role"]: r["direct_usd"] for r in found["roles"]}["judge"] is None
    assert "no price for model mystery-7b" in found["text"]
    assert loopback.count() == 0 and EvaluationRun.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"topic_id": "nope"}, 404, "topic_id"),
        ({"topic_id": "comparing-decimals", "max_turns": 0}, 400, "max_turns"),
        ({"topic_id": "comparing-decimals", "provider": "nobody"}, 400, "provider"),
        ({"topic_id": "comparing-decimals", "dry_run": "maybe"}, 400, "dry_run"),
    ],
    ids=["unknown-topic", "max-turns", "provider", "dry-run-not-bool"],
)
def test_a_bad_dry_run_is_refused_naming_the_field(staff_client, catalog, body, status, field):
    answer = staff_client.post(
        "/api/evaluation/start", {**body, "dry_run": body.get("dry_run", True)}, content_type="application/json"
    )
    assert answer.status_code == status and field in answer.content.decode()
    assert EvaluationRun.objects.count() == 0


def test_the_cli_prints_the_price_and_starts_nothing(catalog, prices, loopback):
    out = StringIO()
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    call_command(
        "run_evaluation", "--dry-run", "--persona", "ace", "--max-turns", "3", "--provider", provider, stdout=out
    )
    text = out.getvalue()
    assert "nothing was created or sent" in text
    assert "simulator: 3 calls to openai/gpt-5.2" in text and "judge: 1 call to openai/gpt-5.2" in text
    assert "In all: 7 calls" in text and "by batch $" in text
    assert EvaluationRun.objects.count() == 0 and loopback.count() == 0
    with pytest.raises(CommandError, match="persona: no persona 'nobody'"):
        call_command("run_evaluation", "--dry-run", "--persona", "nobody", stdout=StringIO())


def test_the_cli_help_names_the_dry_run():
    from django.core.management import load_command_class

    help_text = load_command_class("evaluation", "run_evaluation").create_parser("manage.py", "run_evaluation")
    assert "--dry-run" in help_text.format_help()


def test_a_judging_job_is_priced_from_each_items_text_and_nothing_is_judged(db, prices, loopback):
    import json

    from evaluation.judging import selectors, services
    from evaluation.judging.judge import build_user_message, schema, system_prompt
    from evaluation.judging.values import rubric_spec
    from evaluation.models import JudgeScore
    from evaluation.providers.forecast import estimate_tokens
    from tests.judging.synthetic import candidate_sets

    services.transcripts_import(json.dumps(candidate_sets(5, 3, seed=4)), file="priced.json")
    rubric = services.rubric_get("tutor-response")
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    found = selectors.judging_forecast(rubric=rubric, provider=provider, repeats=3)
    assert loopback.count() == 0 and not JudgeScore.objects.exists()

    spec = rubric_spec(rubric)
    from evaluation.judging.judge import _inputs

    items = _inputs(spec, None)
    assert len(items) == 15
    # Independently: per item, the system prompt, the reply's JSON schema as the judge sends it (written out
    # here: the instruction Anthropic's system prompt carries) and the item's text (4 tokens a message
    # besides), 3 repeats.
    instruction = (
        "Reply with one JSON object and nothing else. It must match this JSON schema:\n"
        f"```json\n{json.dumps(schema(spec))}\n```"
    )
    assert estimate_tokens(instruction) > 200  # left out, the high would be no ceiling
    prompt = sum(
        estimate_tokens(system_prompt(spec))
        + estimate_tokens(instruction)
        + estimate_tokens(build_user_message(spec, i))
        + 8
        for i in items
    )
    (line,) = found.lines
    assert line.calls == 45 and line.input_tokens == (3 * prompt, 3 * prompt)
    low = (3 * prompt * GPT["input"] + line.output_tokens[0] * GPT["output"]) / 1e6
    assert found.direct_usd[0] == pytest.approx(low) and found.batch_usd[0] == pytest.approx(low / 2)
    assert line.output_tokens[1] == 45 * 2000  # rubric_judge's max_tokens


def test_the_api_prices_a_judging_job_and_judges_nothing(staff_client, prices, loopback):
    import json

    from django_q.models import OrmQ, Task

    from evaluation.judging import services
    from evaluation.models import JudgeScore
    from tests.judging.synthetic import candidate_sets

    services.transcripts_import(json.dumps(candidate_sets(4, 2, seed=5)), file="priced.json")
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    body = {"rubric": "tutor-response", "provider": provider, "repeats": 2, "dry_run": True}
    answer = staff_client.post("/api/judging/jobs", body, content_type="application/json")
    assert answer.status_code == 200, answer.content
    found = answer.json()
    assert found["dry_run"] is True and found["calls"] == 16
    (role,) = found["roles"]
    low = (role["input_tokens"]["low"] * GPT["input"] + role["output_tokens"]["low"] * GPT["output"]) / 1e6
    assert found["direct_usd"]["low"] == pytest.approx(low, abs=1e-6)
    assert found["batch_usd"]["low"] == pytest.approx(low / 2, abs=1e-6)
    assert loopback.count() == 0 and not JudgeScore.objects.exists()
    assert not OrmQ.objects.exists() and not Task.objects.exists()  # nothing queued
    for sent, field in (
        ({"rubric": "nope"}, "rubric"),
        ({"rubric": "tutor-response", "repeats": 0}, "repeats"),
        ({"rubric": "tutor-response", "provider": "nobody"}, "provider"),
        ({"rubric": "tutor-response", "dry_run": "maybe"}, "dry_run"),
    ):
        answer = staff_client.post("/api/judging/jobs", {"dry_run": True, **sent}, content_type="application/json")
        assert answer.status_code == 400 and field in answer.json()["fields"], (sent, answer.content)


def test_a_dry_run_needs_no_key_its_plan_names_the_judge_without_a_client(staff_client, catalog, prices, monkeypatch):
    """A price and a plan send nothing, so they need no key: the plan names the judge as its runs would record
    it (openai/gpt-5.2) without building a client (which refuses a missing key); only a start asks for the key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    body = {"topic_id": "comparing-decimals", "persona_file": "ace", "max_turns": 6, "provider": "openai/gpt-5.2"}
    answer = staff_client.post("/api/evaluation/start", {**body, "dry_run": True}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["plan"]["runs_per_persona"] is None and "no comparable group" in answer.json()["plan"]["text"]
    started = staff_client.post("/api/evaluation/start", body, content_type="application/json")
    assert started.status_code == 400 and "OPENAI_API_KEY" in started.content.decode()
    assert EvaluationRun.objects.count() == 0
