"""The batch APIs on the wire: OpenAI's Batch API and Anthropic's Message Batches through the real SDKs,
against the loopback server, which answers each line as its single endpoint would."""

import json

import pytest

from evaluation.providers import ProviderSpec
from evaluation.providers.base import Message
from evaluation.providers.batch import BatchCall, request_for, vendor_for, wire_ids
from evaluation.providers.client import LLM

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "object",
    "required": ["verdict", "score"],
    "properties": {"verdict": {"enum": ["good", "poor"]}, "score": {"type": "integer", "minimum": 0, "maximum": 4}},
}


@pytest.fixture
def desk(loopback):
    loopback.batch_desk.reset()
    yield loopback.batch_desk
    loopback.batch_desk.reset()


def calls(n: int, schema=SCHEMA) -> dict[str, BatchCall]:
    return {
        f"line-{i}": BatchCall(
            messages=(Message("system", "Judge the reply."), Message("user", f"Reply number {i}.")),
            schema=schema,
            settings=(("seed", i),),
        )
        for i in range(1, n + 1)
    }


def llm_for(spec: ProviderSpec) -> LLM:
    return LLM(spec, "rubric_judge")


def drive(llm: LLM, lines: dict[str, BatchCall]):
    vendor = vendor_for(llm)
    requests = {cid: request_for(llm, call) for cid, call in lines.items()}
    batch_id = vendor.submit(requests)
    seen = []
    while True:
        progress = vendor.poll(batch_id, len(requests))
        seen.append(progress)
        if progress.ended:
            break
        assert len(seen) < 20, "the batch never ended"
    return batch_id, seen, vendor.fetch(batch_id, requests)


def test_openai_responses_batch_answers_each_line_as_the_single_endpoint(loopback, desk):
    desk.polls_to_end = 2
    desk.fail_ids = {wire_ids(calls(3))["line-2"]}  # the loopback sees the wire's short ids
    llm = llm_for(ProviderSpec("openai", "gpt-5.2", loopback.openai_url, {"api": "responses"}))
    batch_id, seen, lines = drive(llm, calls(3))
    assert batch_id.startswith("batch_") and desk.creates == 1
    assert [p.ended for p in seen] == [False, False, True]
    assert [p.provider_state for p in seen] == ["in_progress", "in_progress", "completed"]
    assert (seen[-1].total, seen[-1].done, seen[-1].failed) == (3, 2, 1)
    # every line reached the responses endpoint with the body the direct call sends (no stream, schema as format)
    bodies = [r.body for r in loopback.requests if r.endpoint == "responses"]
    assert len(bodies) == 3 and all(b["model"] == "gpt-5.2" for b in bodies)
    assert bodies[0]["text"]["format"]["schema"] == SCHEMA and "stream" not in bodies[0]
    assert bodies[0]["input"][1] == {"role": "user", "content": "Reply number 1."}
    assert len({b["prompt_cache_key"] for b in bodies}) == 1  # one stable prefix, one cache
    good = lines["line-1"]
    assert json.loads(good.text) == {"verdict": "good", "score": 2}  # the loopback's example of the schema
    assert good.usage.input_tokens > 0 and good.usage.output_tokens > 0 and good.usage.calls == 1
    assert isinstance(lines["line-2"], str) and "HTTP 500" in lines["line-2"]
    assert not isinstance(lines["line-3"], str)


def test_openai_compatible_server_gets_chat_completion_lines(loopback, desk):
    llm = llm_for(ProviderSpec("openai", "llama3", loopback.openai_url))
    _, seen, lines = drive(llm, calls(2, schema=None))
    assert seen[-1].ended and (seen[-1].done, seen[-1].failed) == (2, 0)
    assert loopback.count("chat") == 2 and loopback.count("responses") == 0
    texts = sorted(c.text for c in lines.values())
    assert len(set(texts)) == 2 and all(t.startswith("Loopback reply ") for t in texts)


def test_anthropic_message_batch_sends_params_without_stream_and_reads_results(loopback, desk):
    desk.polls_to_end = 1
    desk.fail_ids = {wire_ids(calls(2))["line-1"]}
    llm = llm_for(ProviderSpec("anthropic", "claude-opus-4-6", loopback.anthropic_url, {"thinking_budget": 0}))
    batch_id, seen, lines = drive(llm, calls(2))
    assert batch_id.startswith("msgbatch_") and desk.creates == 1
    assert [p.provider_state for p in seen] == ["in_progress", "ended"]
    assert (seen[-1].total, seen[-1].done, seen[-1].failed) == (2, 1, 1)
    bodies = [r.body for r in loopback.requests if r.endpoint == "messages"]
    assert len(bodies) == 2 and not any("stream" in b for b in bodies)
    # the direct call's body: the system prompt as blocks, the last one a cache breakpoint
    assert "It must match this JSON schema" in bodies[0]["system"][-1]["text"]
    # batch lines ask for the 1-hour cache: a batch may run longer than 5 minutes
    assert bodies[0]["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert lines["line-1"].startswith("errored") and "loopback error 500" in lines["line-1"]
    assert json.loads(lines["line-2"].text) == {"verdict": "good", "score": 2}


def test_a_line_the_server_scripts_as_an_error_fails_alone(loopback, desk):
    from evaluation.providers.loopback import Reply

    loopback.script(Reply(status=400, error_message="bad line"), endpoint="chat")
    llm = llm_for(ProviderSpec("openai", "llama3", loopback.openai_url))
    _, seen, lines = drive(llm, calls(2, schema=None))
    assert (seen[-1].done, seen[-1].failed) == (1, 1)
    assert sorted(type(v).__name__ for v in lines.values()) == ["Completion", "str"]
    assert any(isinstance(v, str) and "HTTP 400: bad line" in v for v in lines.values())


def test_the_offline_provider_completes_a_batch_at_once_with_the_direct_answers():
    llm = llm_for(ProviderSpec("offline"))
    lines = calls(3, schema=None)
    _, seen, answers = drive(llm, lines)
    assert len(seen) == 1 and seen[0].ended and seen[0].done == 3
    for cid, call in lines.items():
        direct = llm.call(list(call.messages), **dict(call.settings))
        assert answers[cid].text == direct.text


def test_unknown_batch_ids_and_bad_batch_requests_are_refused_with_the_reason(loopback, desk):
    import anthropic
    import openai

    client = openai.OpenAI(api_key="k", base_url=loopback.openai_url, max_retries=0)
    with pytest.raises(openai.NotFoundError, match="no batch batch_nope"):
        client.batches.retrieve("batch_nope")
    with pytest.raises(openai.BadRequestError, match="endpoint '/v1/embeddings'"):
        client.batches.create(input_file_id="file_x", endpoint="/v1/embeddings", completion_window="24h")
    claude = anthropic.Anthropic(api_key="k", base_url=loopback.anthropic_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="requests: must be a non-empty list"):
        claude.messages.batches.create(requests=[])
    assert desk.creates == 0


def test_replay_answers_a_batch_from_the_recordings_and_fails_a_line_never_recorded(tmp_path):
    recorder = LLM(ProviderSpec("offline"), "rubric_judge", record_dir=tmp_path)
    lines = calls(3, schema=None)
    recorded = {cid: recorder.call(list(c.messages), **dict(c.settings)).text for cid, c in list(lines.items())[:2]}
    replayer = llm_for(ProviderSpec("replay", "offline-rules-v1", options={"dir": str(tmp_path)}))
    _, seen, answers = drive(replayer, lines)
    assert seen[-1].ended
    assert {cid: answers[cid].text for cid in recorded} == recorded
    assert isinstance(answers["line-3"], str) and "replay: no recording for role 'rubric_judge'" in answers["line-3"]
