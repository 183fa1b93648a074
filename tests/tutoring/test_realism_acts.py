"""Dialogue acts from an LLM: each student turn labelled through the provider layer with a JSON schema (the real
OpenAI SDK against the loopback server), once per (tutor message, turn) and model, the card naming the classifier
on each side; the offline provider keeps the rules."""

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from evaluation.models import LLMConfig
from evaluation.providers.loopback import Reply
from evaluation.text import student_turns
from evaluation.text.student_turns import ActClassifier, dialogue_act
from tests.tutoring.test_realism_doors import bridge_file, make_runs

ASKING = "So we keep the bottom number the same right"
"""The rules call this a question ("so" is no question word, but the tutor asked, and it holds content words: an
answer attempt); the loopback's model calls it a question."""
LABELS = {ASKING: "question", "3/4": "answer_attempt", "ok": "acknowledgement", "2/5": "answer_attempt"}
LABELS["idk"] = "other"  # the model disagrees with the rules (confusion) here too


@pytest.fixture
def labelling(loopback):
    """The loopback answers an act call with LABELS[the student's turn], and counts the turns it was asked."""
    student_turns.ACT_CACHE.clear()
    asked: list[str] = []

    def responder(endpoint, body, n):
        blob = json.dumps(body)
        text = re.search(r"Student's turn:\\n(.*?)\"", blob).group(1)
        asked.append(text)
        return Reply(json={"act": LABELS[text]})

    loopback.responder = responder
    yield asked
    student_turns.ACT_CACHE.clear()


def run_json(*args: str) -> dict:
    out = StringIO()
    call_command("realism", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_an_llm_labels_each_turn_once_and_the_card_says_so(catalog, loopback, labelling, tmp_path):
    assert dialogue_act(ASKING, tutor_asked=True) == "answer_attempt"  # what the rules say
    make_runs("ace", 6, ASKING)
    call_command("import_transcripts", str(bridge_file(tmp_path)), "--format", "bridge", stdout=StringIO())
    spec = f"openai/act-m@{loopback.openai_url}"
    data = run_json("--persona", "ace", "--reference", "imported:bridge", "--acts", spec)
    card = data["sets"][0]
    assert card["acts_by"] == card["reference_acts_by"] == "llm:openai/act-m" == data["acts_by"]
    acts = next(m for m in card["measures"] if m["name"] == "act_distribution")
    assert acts["value"]["question"] == 1.0 and acts["value"]["answer_attempt"] == 0.0  # the model's, not the rules'
    ref = acts["reference_value"]  # 8 excerpts: 3/4 or ok, 2/5, idk
    assert ref == pytest.approx(
        {
            "answer_attempt": 12 / 24,
            "question": 0,
            "acknowledgement": 4 / 24,
            "confusion": 0,
            "off_task": 0,
            "other": 8 / 24,
        },
        abs=1e-4,
    )
    assert acts["flag"] is True and not acts["rule"].startswith("not judged")
    # One call per distinct (tutor message, turn): the runs' 24 turns are one; the reference's 24 are five
    # ("3/4" and "ok" after one question, "2/5", "idk").
    assert sorted(labelling) == sorted([ASKING, "3/4", "ok", "2/5", "idk"])
    assert data["act_calls"] == 5 and data["act_failures"] == 0
    # The same card again asks nothing: every turn is cached.
    again = run_json("--persona", "ace", "--reference", "imported:bridge", "--acts", spec)
    assert len(labelling) == 5 and again["act_calls"] == 0
    assert again["sets"][0]["measures"] == card["measures"]


@pytest.mark.django_db
def test_against_the_shipped_table_the_act_measures_are_not_judged_across_classifiers(catalog, loopback, labelling):
    make_runs("ace", 6, ASKING)
    data = run_json("--persona", "ace", "--acts", f"openai/act-m@{loopback.openai_url}")
    card = data["sets"][0]
    assert card["acts_by"] == "llm:openai/act-m" and card["reference_acts_by"] == "rules"
    by_name = {m["name"]: m for m in card["measures"]}
    for name in ("act_distribution", "answer_attempt_rate"):
        assert by_name[name]["flag"] is None
        assert by_name[name]["rule"].startswith("not judged: the set's acts are by llm:openai/act-m")
    assert by_name["words_per_turn"]["flag"] is True  # the measures read from words are judged as ever
    # With the rules on both sides, the same runs' acts are judged.
    rules = run_json("--persona", "ace", "--acts", "rules")["sets"][0]
    assert rules["acts_by"] == "rules" and len(labelling) == 1
    assert next(m for m in rules["measures"] if m["name"] == "answer_attempt_rate")["flag"] is not None


def test_the_offline_provider_keeps_the_rules_and_a_failed_call_falls_back_to_them(loopback):
    from evaluation.providers import get_llm

    student_turns.ACT_CACHE.clear()
    offline = ActClassifier(get_llm("judge", override="offline"))
    assert offline.label == "rules" and offline("What is 1/2 + 1/4?", "idk") == "confusion" and offline.calls == 0

    def refuse(endpoint, body, n):
        return Reply(status=400, error_message="no")

    loopback.responder = refuse
    failing = ActClassifier(get_llm("judge", override=f"openai/act-m@{loopback.openai_url}"))
    assert failing("What is 1/2 + 1/4?", "idk") == "confusion"
    assert failing.calls == 1 and failing.failed == 1
    assert not student_turns.ACT_CACHE  # a failure is not cached: the next card asks again


@pytest.mark.django_db
def test_the_api_takes_the_judge_roles_llm_for_acts(catalog, loopback, labelling, staff_user):
    make_runs("ace", 6, ASKING)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    plain = api.get("/api/tutoring/realism", {"persona": "ace"}).json()
    assert plain["acts_by"] == "rules" and plain["sets"][0]["acts_by"] == "rules" and not labelling
    LLMConfig.objects.create(role="judge", provider="openai", model="act-m", base_url=loopback.openai_url)
    got = api.get("/api/tutoring/realism", {"persona": "ace", "acts": "judge"})
    assert got.status_code == 200, got.content
    assert got.json()["sets"][0]["acts_by"] == "llm:openai/act-m" and labelling == [ASKING]
    assert api.get("/api/tutoring/realism", {"acts": "gpt"}).status_code == 400


# --- next-turn tests through the judging's batch path, per simulator model ---------------------------------------


@pytest.fixture
def two_models(loopback, settings):
    """sim-terse writes "3/4"; sim-chatty writes a sentence of twelve words."""
    loopback.batch_desk.reset()
    settings.EVALUATION = {**settings.EVALUATION, "BATCH_POLL_SECONDS": 0.01}

    def responder(endpoint, body, n):
        model = body.get("model", "")
        return Reply(text="3/4" if "terse" in model else "I think that the answer should be three quarters of it")

    loopback.responder = responder
    yield loopback
    loopback.batch_desk.reset()


@pytest.mark.django_db
def test_next_turn_tests_go_by_provider_batch_and_report_per_simulator_model(catalog, two_models, tmp_path):
    from evaluation.models import ProviderBatch

    call_command("import_transcripts", str(bridge_file(tmp_path, n=2)), "--format", "bridge", stdout=StringIO())
    url = two_models.openai_url
    args = ["--next-turn", "--transcripts", "bridge", "--persona", "struggler"]
    models = ["--provider", f"openai/sim-terse@{url}", "--provider", f"openai/sim-chatty@{url}"]
    data = run_json(*args, *models, "--batch")
    reports = {r["simulator"]: r for r in data["reports"]}
    assert set(reports) == {"openai/sim-terse", "openai/sim-chatty"}
    terse, chatty = reports["openai/sim-terse"], reports["openai/sim-chatty"]
    assert terse["turns"] == chatty["turns"] == 6 and terse["failed"] == chatty["failed"] == 0
    assert terse["median_words"] == 1 and chatty["median_words"] == 11
    assert terse["mean_length_gap"] < chatty["mean_length_gap"]  # the terse model writes more like these students
    assert terse["batch"].startswith("openai batch ") and chatty["batch"].startswith("openai batch ")
    assert two_models.batch_desk.creates == 2  # one batch per persona and model, no direct call
    batches = ProviderBatch.objects.filter(kind="next_turn")
    assert sorted(batches.values_list("state", "total", "model")) == [
        ("applied", 6, "sim-chatty"),
        ("applied", 6, "sim-terse"),
    ]
    # The batch lines are the simulator's own calls: the persona's prompt and the turn directive
    line = next(r.body for r in two_models.requests if "sim-terse" in json.dumps(r.body))
    assert "TURN DIRECTIVE" in json.dumps(line) and "You are " in json.dumps(line)
    # Direct calls give the same reports (the same calls, one at a time)
    direct = {r["simulator"]: r for r in run_json(*args, *models)["reports"]}
    assert direct["openai/sim-terse"]["batch"] == "" and two_models.batch_desk.creates == 2
    for name in reports:
        assert {k: v for k, v in direct[name].items() if k not in ("batch", "cost_usd", "cached_input_tokens")} == {
            k: v for k, v in reports[name].items() if k not in ("batch", "cost_usd", "cached_input_tokens")
        }


@pytest.mark.django_db
def test_offline_batch_and_direct_next_turns_agree(catalog, tmp_path):
    call_command("import_transcripts", str(bridge_file(tmp_path, n=3)), "--format", "bridge", stdout=StringIO())
    args = ["--next-turn", "--transcripts", "bridge", "--persona", "ace", "--provider", "offline"]
    by_batch = run_json(*args, "--batch")["reports"][0]
    direct = run_json(*args)["reports"][0]
    assert by_batch["batch"].startswith("offline batch") and direct["batch"] == ""
    assert by_batch["turns"] == direct["turns"] == 9
    assert {k: v for k, v in by_batch.items() if k != "batch"} == {k: v for k, v in direct.items() if k != "batch"}


@pytest.mark.django_db
def test_a_dry_run_prices_a_next_turn_job_per_simulator_model_and_sends_nothing(catalog, loopback, tmp_path):
    from evaluation.providers.accounting import estimate_cost
    from evaluation.providers.base import Usage

    call_command("import_transcripts", str(bridge_file(tmp_path, n=2)), "--format", "bridge", stdout=StringIO())
    data = run_json(
        "--next-turn", "--transcripts", "bridge", "--persona", "all", "--dry-run",
        "--provider", "openai/gpt-5.2", "--provider", "offline",
    )  # fmt: skip
    plan = data["forecast"]
    personas = 8
    assert plan["calls"] == 2 * personas * 6
    paid, free = plan["roles"]
    assert (paid["provider"], paid["model"], paid["calls"], paid["free"]) == ("openai", "gpt-5.2", personas * 6, False)
    assert free["free"] is True and free["model"] and free["calls"] == personas * 6
    low = estimate_cost(
        "gpt-5.2", Usage(input_tokens=paid["input_tokens"]["low"], output_tokens=paid["output_tokens"]["low"])
    )
    assert paid["direct_usd"]["low"] == pytest.approx(low, abs=1e-6) and paid["batch_usd"]["low"] < low
    assert loopback.count() == 0
    out = StringIO()
    call_command("realism", "--next-turn", "--transcripts", "bridge", "--dry-run", "--provider", "openai/gpt-5.2",
                 stdout=out)  # fmt: skip
    assert "simulator: 48 calls to openai/gpt-5.2" in out.getvalue() and "prompt caching" in out.getvalue()
