"""OpenAI-compatible servers as they are: the loopback made to answer as llama-cpp-python's server and
strict chat templates do, and the replies small models give."""

import pytest

from evaluation.providers import InvalidJSONError, Message, ProviderSpec, get_llm
from evaluation.providers.base import BadRequestError
from evaluation.providers.client import read_json
from evaluation.providers.compat import EndpointTraits, alternating, endpoint_name, plumbing_only
from evaluation.providers.loopback import Reply, default_responder

SCHEMA = {
    "type": "object",
    "required": ["score", "why"],
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "why": {"type": "string"}},
}
ASK = [Message("system", "You rate answers."), Message("user", "Rate: 2 + 2 = 4.")]


@pytest.fixture(autouse=True)
def _not_openai(loopback):
    """These servers are not OpenAI: they take what OpenAI refuses (json_object with a schema beside it), so the
    loopback answers as they do, without the vendor's checks (the loopback's reset puts them back)."""
    loopback.strict = False


def llm_at(loopback, model, **options):
    return get_llm("rubric_judge", override=ProviderSpec("openai", model, loopback.openai_url, dict(options)))


def formats(loopback):
    return [(r.body.get("response_format") or {}).get("type", "none") for r in loopback.requests]


def test_a_server_refusing_json_schema_gets_json_object_with_the_schema_and_keeps_it(loopback):
    """llama-cpp-python's server answers response_format json_schema with a 500 and takes json_object + schema."""

    def like_llama_cpp_python(endpoint, body, n):
        if body.get("response_format", {}).get("type") == "json_schema":
            return Reply(status=500, error_message="'json_schema' is not a valid response format")
        return Reply(json={"score": 4, "why": "right"})

    loopback.responder = like_llama_cpp_python
    llm = llm_at(loopback, "lcp-1")
    assert llm.call(ASK, schema=SCHEMA).data == {"score": 4, "why": "right"}
    assert llm.call(ASK, schema=SCHEMA).data["score"] == 4
    assert formats(loopback) == ["json_schema", "json_object", "json_object"]  # learned once, per endpoint
    assert loopback.requests[1].body["response_format"]["schema"] == SCHEMA


def test_a_server_taking_no_response_format_is_asked_in_the_prompt(loopback):
    def no_formats(endpoint, body, n):
        if "response_format" in body:
            return Reply(status=400, error_message="response_format is not supported")
        return Reply(text='{"score": 3, "why": "ok"}')

    loopback.responder = no_formats
    assert llm_at(loopback, "plain-1").call(ASK, schema=SCHEMA).data["score"] == 3
    assert formats(loopback) == ["json_schema", "json_object", "none"]
    first = loopback.requests[-1].body["messages"][0]
    assert first["role"] == "system" and '"maximum": 5' in first["content"] and "JSON" in first["content"]


def test_a_configured_json_mode_is_the_only_one_tried(loopback):
    loopback.responder = lambda endpoint, body, n: Reply(status=500, error_message="no")
    with pytest.raises(Exception, match="HTTP 500"):
        llm_at(loopback, "fixed-1", json_mode="json_object").call(ASK, schema=SCHEMA)
    assert set(formats(loopback)) == {"json_object"}
    with pytest.raises(ValueError, match="json_mode 'xml'"):
        EndpointTraits({"json_mode": "xml"})


def test_a_strict_chat_template_gets_alternating_roles(loopback):
    """Gemma's template refuses [system, assistant, user, ..., system]: the provider sends the same
    conversation with the roles alternating, starting with the user, and keeps doing so."""

    def strict(endpoint, body, n):
        roles = [m["role"] for m in body["messages"]]
        if roles[0] == "system":
            roles = roles[1:]
        if any(role != ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(roles)):
            return Reply(
                status=500, error_message="Conversation roles must alternate user/assistant/user/assistant/..."
            )
        return default_responder(endpoint, body, n)

    loopback.responder = strict
    tutor = get_llm("tutor", override=ProviderSpec("openai", "gemma-strict", loopback.openai_url, {}))
    history = [
        Message("system", "You are a tutor."),
        Message("assistant", "Hi! What is 3 + 4?"),
        Message("user", "7"),
        Message("assistant", "Right. And 5 + 6?"),
        Message("user", "12?"),
    ]
    assert tutor.call(history, directive="Current problem: 5 + 6 (answer 11).").text
    sent = loopback.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert (
        sent[-1]["content"] == "12?\n\nCurrent problem: 5 + 6 (answer 11)."
        and sent[2]["content"] == "Hi! What is 3 + 4?"
    )
    tutor.call(history, directive="again")
    assert len(loopback.requests) == 3  # refused once, then alternating from the start
    # another server's other refusals are not mistaken for it
    loopback.responder = lambda endpoint, body, n: Reply(status=400, error_message="max_tokens too large")
    with pytest.raises(BadRequestError, match="max_tokens too large"):
        get_llm("tutor", override=ProviderSpec("openai", "other-1", loopback.openai_url, {})).call(history)
    assert len(loopback.requests) == 4


def test_alternating_keeps_every_word():
    messages = [
        {"role": "system", "content": "S1"},
        {"role": "system", "content": "S2"},
        {"role": "user", "content": "U1"},
        {"role": "user", "content": "U2"},
        {"role": "system", "content": "D"},
    ]
    assert alternating(messages) == [
        {"role": "system", "content": "S1\n\nS2"},
        {"role": "user", "content": "U1\n\nU2\n\nD"},
    ]
    assert alternating([{"role": "system", "content": "D"}, {"role": "assistant", "content": "A"}])[1:] == [
        {"role": "user", "content": "(The conversation begins.)"},
        {"role": "assistant", "content": "A"},
    ]


def test_small_model_replies_end_repaired_or_as_named_failures(loopback):
    # raw control characters inside a string: read as text, and the repair is named
    loopback.script(Reply(text='{"score": 2, "why": "line one\nline\ttwo"}'))
    result = llm_at(loopback, "small-1").call(ASK, schema=SCHEMA)
    assert result.data == {"score": 2, "why": "line one\nline\ttwo"}
    assert result.repaired == "raw control characters in strings read as text" and result.usage.calls == 1
    # one object inside chatter
    loopback.script(Reply(text='Sure! {"score": 5, "why": "x"} Hope that helps.'))
    result = llm_at(loopback, "small-1").call(ASK, schema=SCHEMA)
    assert result.data["score"] == 5 and result.repaired.startswith("one JSON object taken from the text")
    # a number off the schema's scale, twice: a named failure, never a score
    loopback.script(Reply(json={"score": 9, "why": "x"}), Reply(json={"score": 0, "why": "x"}))
    with pytest.raises(InvalidJSONError, match=r"9 is greater than the maximum of 5.*0 is less than the minimum of 1"):
        llm_at(loopback, "small-1").call(ASK, schema=SCHEMA)
    # valid after being asked again: repaired, and says why
    loopback.script(Reply(text="I think it is good"), Reply(json={"score": 3, "why": "x"}))
    result = llm_at(loopback, "small-1").call(ASK, schema=SCHEMA)
    assert result.data["score"] == 3 and result.repaired.startswith("asked again: the reply not valid JSON")
    # the prompt echoed back (a base model continuing its prompt), twice
    asked = [*ASK, Message("user", "Give the score as an integer from 1 (worst) to 5 (best).")]
    echo = "# Answer\nGive the score as an integer from 1 (worst) to 5 (best).\nRate: 2 + 2 = 4."
    loopback.script(Reply(text=echo), Reply(text=echo))
    with pytest.raises(InvalidJSONError, match="reply echoes the prompt instead of answering.*still echoes the prompt"):
        llm_at(loopback, "small-1").call(asked, schema=SCHEMA)


def test_a_reply_cut_at_max_tokens_says_so():
    data, reason, repair = read_json('{"score": 4, "why": "because the ans', SCHEMA, cut=True)
    assert data is None and reason.startswith("was cut at max_tokens before its JSON ended")
    assert read_json('{"score": 4, "why": "because the ans', SCHEMA)[1].startswith("not valid JSON")


def test_timeouts_grow_with_the_speed_the_endpoint_shows(loopback, settings):
    """A slow server's reply measures it; later calls get the time max_tokens needs at that speed."""
    settings.EVALUATION = {**settings.EVALUATION, "LLM_TIMEOUT_SECONDS": 2.0}
    loopback.latency = 0.5
    loopback.script(Reply(text=" ".join(["word"] * 40)))
    llm = get_llm("tutor", override=ProviderSpec("openai", "slow-1", loopback.openai_url, {}))
    first = llm.call(ASK)
    assert first.request.timeout == 2.0  # nothing measured yet
    speed = llm.provider.traits.speed.output
    assert 0 < speed <= first.usage.output_tokens / 0.5  # the tokens over at least the latency
    second = llm.call(ASK)
    assert second.request.timeout >= 2 * 600 / speed  # the tutor's 600 tokens at the speed seen
    # configured: the speed is taken as given (600 tokens at 30 a second, twice over)
    configured = get_llm(
        "tutor", override=ProviderSpec("openai", "slow-2", loopback.openai_url, {"tokens_per_second": 30})
    )
    assert 40.0 <= configured.call(ASK).request.timeout <= 41.0


def test_a_local_judge_keeps_its_identity_across_ports():
    assert endpoint_name("http://127.0.0.1:41234/v1", {}) == "local" == endpoint_name("http://localhost:8080/v1", {})
    assert endpoint_name("http://127.0.0.1:41234/v1", {"endpoint_name": "gemma-box"}) == "gemma-box"
    assert endpoint_name("https://llm.internal/v1", {}) == "https://llm.internal/v1"  # as identities were before
    assert endpoint_name("", {}) == ""
    assert "no measurement of quality" in plumbing_only("openai/gemma-3-270m-q4_k_m@local | prompt x")
    assert plumbing_only("openai/gpt-5.2") == ""
