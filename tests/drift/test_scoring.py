"""Drift scoring against the loopback judge: arithmetic, batching, repair, unscored checks."""

import json
import re

import pytest
from django.utils import timezone

from evaluation.drift.services import drift_evaluate
from evaluation.models import Agent, AgentMessage, Proposition, PropositionScore, PropositionSet
from evaluation.providers.loopback import Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(db):
    agent = Agent.objects.create(
        id="testy", display_name="Testy McTest", kind="character", persona_spec="Testy is terse."
    )
    for i, text in enumerate(["Short. Done.", "Fine. Next.", "No.", "Who does it?", "Me. Again."]):
        AgentMessage.objects.create(
            agent=agent, channel="general", text=text, created_at=timezone.now() + timezone.timedelta(seconds=i)
        )
    return agent


def props(dimension, *items, agent_key="testy"):
    pset = PropositionSet.objects.create(dimension=dimension, agent_key=agent_key)
    for i, (pid, weight, inverted) in enumerate(items):
        Proposition.objects.create(
            proposition_set=pset,
            proposition_id=pid,
            claim=f"{{{{agent_name}}}} claim {pid}",
            weight=weight,
            inverted=inverted,
            position=i,
        )


def judge_with(table, *, drop=(), bad=()):
    """Answer every check from table[proposition id][message index]; leave out or spoil some ids."""

    def respond(endpoint, body, n):
        text = body["messages"][-1]["content"]
        ids = re.findall(r"### Check (\S+)", text)
        scores = []
        for cid in ids:
            if cid in drop and "previous reply had problems" not in text:
                continue
            pid, index = cid.rsplit("#", 1)
            score = 42 if cid in bad else table[pid][int(index)]
            scores.append({"id": cid, "score": score, "reasoning": f"because {cid}"})
        return Reply(json={"scores": scores})

    return respond


def judge(loopback):
    return f"openai/judge@{loopback.openai_url}"


def test_weights_and_inversion(agent, loopback):
    props("adherence", ("plain", 1.0, False), ("anti", 0.5, True))
    loopback.responder = judge_with({"plain": [8, 6, 7, 7, 7], "anti": [2, 4, 3, 3, 3]})
    run = drift_evaluate(agent=agent, dimensions=["adherence"], judge=judge(loopback))
    assert run.status == "completed", run.error
    scores = {p.proposition_id: p.score for p in PropositionScore.objects.filter(evaluation_run=run)}
    assert scores == {"plain": 7.0, "anti": 6.0}  # anti: judge mean 3, inverted to 9 - 3
    assert run.dimension_scores.get().score == pytest.approx((1.0 * 7 + 0.5 * 6) / 1.5, abs=1e-3)
    assert "inverted" in PropositionScore.objects.get(evaluation_run=run, proposition_id="anti").reasoning


@pytest.mark.parametrize(("batch", "calls"), [(4, 4), (5, 3), (20, 1), (1, 15)])
def test_checks_are_batched(agent, loopback, settings, batch, calls):
    settings.EVALUATION = {**settings.EVALUATION, "DRIFT_BATCH_SIZE": batch}
    props(
        "adherence", ("a", 1.0, False), ("b", 1.0, False), ("c", 1.0, False)
    )  # 3 propositions x 5 messages = 15 checks
    loopback.responder = judge_with({p: [5] * 5 for p in "abc"})
    run = drift_evaluate(agent=agent, dimensions=["adherence"], judge=judge(loopback))
    assert run.status == "completed" and loopback.count() == calls
    asked = sum(len(re.findall(r"### Check ", r.body["messages"][-1]["content"])) for r in loopback.requests)
    assert asked == 15


def test_missing_and_out_of_range_scores_are_repaired_once_then_unscored(agent, loopback):
    props("adherence", ("good", 1.0, False), ("flaky", 1.0, False), ("broken", 1.0, False))
    table = {"good": [6] * 5, "flaky": [4] * 5, "broken": [5] * 5}
    # flaky#0 is left out of the first reply (the repair supplies it); broken#* stays out of range.
    loopback.responder = judge_with(table, drop={"flaky#0"}, bad={f"broken#{i}" for i in range(5)})
    run = drift_evaluate(agent=agent, dimensions=["adherence"], judge=judge(loopback))
    assert run.status == "completed"
    assert loopback.count() == 2  # one batch, one repair
    repair = loopback.requests[1].body["messages"][-1]["content"]
    assert "flaky#0: the judge's reply had no entry" in repair and "broken#0: score 42 is outside 0-9" in repair
    rows = {p.proposition_id: p for p in PropositionScore.objects.filter(evaluation_run=run)}
    assert rows["flaky"].score == 4.0 and rows["good"].score == 6.0
    assert (
        rows["broken"].score is None
        and "unscored: score 42 is outside 0-9 (after one repair)" in rows["broken"].reasoning
    )
    assert run.dimension_scores.get().score == 5.0  # the unscored proposition is left out


def test_all_four_dimensions_and_computed_measures(agent, loopback):
    other = Agent.objects.create(id="chatty", display_name="Chatty", kind="character", persona_spec="Chatty agrees.")
    for i in range(3):
        AgentMessage.objects.create(
            agent=other, channel="general", text=f"Totally agree, great point number {i}!", created_at=timezone.now()
        )
    for dimension in ("adherence", "consistency", "fluency", "convergence"):
        props(dimension, (f"{dimension}-p", 1.0, False))
    loopback.responder = lambda endpoint, body, n: Reply(
        json={
            "scores": [
                {"id": cid, "score": 9, "reasoning": "x"}
                for cid in re.findall(r"### Check (\S+)", body["messages"][-1]["content"])
            ]
        }
    )
    run = drift_evaluate(agent=agent, judge=judge(loopback))
    scores = {s.dimension: s.score for s in run.dimension_scores.all()}
    assert set(scores) == {"adherence", "consistency", "fluency", "convergence"} and scores["adherence"] == 9
    names = set(PropositionScore.objects.filter(evaluation_run=run).values_list("proposition_id", flat=True))
    assert {"ngram-overlap", "vocabulary-overlap"} <= names  # computed here, no LLM
    convergence_prompt = next(
        r.body["messages"][-1]["content"]
        for r in loopback.requests
        if "Anonymised" in r.body["messages"][-1]["content"]
    )
    assert "Speaker A:" in convergence_prompt and "Testy" not in convergence_prompt.split("Context:")[1]
    consistency_prompt = next(
        r.body["messages"][-1]["content"]
        for r in loopback.requests
        if "Earlier message" in r.body["messages"][-1]["content"]
    )
    assert "terse" not in consistency_prompt  # no persona spec for consistency
    assert run.token_usage["calls"] == len(loopback.requests)


def test_first_n_last_n_bound_the_judges_context_not_what_is_judged(agent, loopback):
    """TinyTroupe's meaning: the judge sees the first n and the last n messages of the trajectory as
    context; every message is still judged (main judged only a slice of them)."""
    pset = PropositionSet.objects.create(dimension="adherence", agent_key="testy", extra={"last_n": 2})
    Proposition.objects.create(proposition_set=pset, proposition_id="recent", claim="x", weight=1)
    Proposition.objects.create(
        proposition_set=pset, proposition_id="opening", claim="y", weight=1, extra={"first_n": 1}
    )
    loopback.responder = judge_with({"recent": [5] * 5, "opening": [5] * 5})
    drift_evaluate(agent=agent, dimensions=["adherence"], judge=judge(loopback))
    text = loopback.requests[0].body["messages"][-1]["content"]
    asked = re.findall(r"### Check (\S+)", text)
    assert asked == [f"recent#{i}" for i in range(5)] + [f"opening#{i}" for i in range(5)]
    checks = dict(re.findall(r"### Check (\S+)\n(.*?)(?=### Check|\Z)", text, flags=re.S))
    recent_context = checks["recent#0"].split("Trajectory (context):")[1].split("Message in")[0]
    assert "Who does it?" in recent_context and "Me. Again." in recent_context and "Short. Done." not in recent_context
    assert "(3 message(s) of the trajectory not shown)" in recent_context
    opening_context = checks["opening#4"].split("Trajectory (context):")[1].split("Message in")[0]
    # first_n from the proposition, last_n from its file: both ends, not the middle
    assert "Short. Done." in opening_context and "Fine. Next." not in opening_context
    assert "Message in #general:\nMe. Again." in checks["opening#4"]


def test_first_n_and_last_n_together_show_both_ends(agent, loopback):
    pset = PropositionSet.objects.create(dimension="fluency", agent_key="testy", extra={"first_n": 2, "last_n": 2})
    Proposition.objects.create(proposition_set=pset, proposition_id="varied", claim="x", weight=1)
    loopback.responder = judge_with({"varied": [6]})
    drift_evaluate(agent=agent, dimensions=["fluency"], judge=judge(loopback))
    text = loopback.requests[0].body["messages"][-1]["content"]
    assert "Short. Done." in text and "Fine. Next." in text and "Who does it?" in text and "Me. Again." in text
    assert "\nNo." not in text  # the middle message is outside both bounds


def test_ingest_api_bulk_jsonl_all_or_nothing(staff_client, agent):
    good = "\n".join(
        json.dumps({"agent": "testy", "channel": "#general", "text": f"line {i}", "time": "2026-11-01T10:00:00Z"})
        for i in range(3)
    )
    response = staff_client.post("/api/drift/messages", good, content_type="application/x-ndjson")
    assert response.status_code == 201 and response.json() == {"created": 3}
    assert AgentMessage.objects.filter(text__startswith="line", channel="general").count() == 3
    bad = good + "\n" + json.dumps({"agent": "nobody", "channel": "x", "text": "y"}) + "\n{not json"
    response = staff_client.post("/api/drift/messages", bad, content_type="application/x-ndjson")
    assert response.status_code == 400 and "line 5" in response.json()["error"]
    response = staff_client.post(
        "/api/drift/messages",
        good.splitlines()[0].replace('"text": "line 0"', '"text": ""'),
        content_type="application/json",
    )
    assert response.status_code == 400 and "body.text: This field may not be blank." in response.json()["error"]
    response = staff_client.post(
        "/api/drift/messages",
        json.dumps([{"agent": "nobody", "channel": "c", "text": "t"}]),
        content_type="application/json",
    )
    assert response.status_code == 400 and "[0].agent: no agent 'nobody'" in response.json()["error"]
    assert AgentMessage.objects.filter(text__startswith="line").count() == 3


def test_drift_page_shows_scores_propositions_and_corrections(staff_client, agent, loopback):
    props("adherence", ("plain", 1.0, False))
    loopback.responder = judge_with({"plain": [3, 4, 5, 6, 7]})
    drift_evaluate(agent=agent, dimensions=["adherence"], judge=judge(loopback))
    html = staff_client.get("/admin/evaluation/drift/testy/").content.decode()
    assert "<svg" in html and "plain" in html and "because plain#0" in html and "No corrections logged." in html
    assert staff_client.get("/admin/evaluation/drift/nobody/").status_code == 404
