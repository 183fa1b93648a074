"""Running suites against the loopback LLM server: checks, verdicts, tools and the pass cache."""

import json
import shutil
from pathlib import Path

import pytest

from evaluation.providers.loopback import Reply
from evaluation.suites import RunOptions, load_file, run_suite
from evaluation.suites.cache import FileCache

ROOT = Path(__file__).resolve().parents[2]


def responder(verdicts=None, warning=None):
    """Agent: plain text, or a native tool call and then 3/4; judge: PASS unless told otherwise per prompt."""
    verdicts = verdicts or {}

    def respond(endpoint, body, n):
        fmt = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
        text = json.dumps(body.get("messages"))
        if "verdict" in fmt.get("properties", {}):
            verdict = next((v for needle, v in verdicts.items() if needle in text), "PASS")
            return Reply(json={"verdict": verdict, "reason": f"judged {verdict}", "warning": warning})
        if body.get("tools"):
            if any(m.get("role") == "tool" for m in body["messages"]):
                return Reply(text="It is 3/4: three quarters.")
            return Reply(
                tool_calls=[
                    {
                        "name": "add_fractions",
                        "arguments": {"a_numerator": 1, "a_denominator": 4, "b_numerator": 2, "b_denominator": 4},
                    }
                ]
            )
        return Reply(text="Hello Sam, lovely to meet you!")

    return respond


@pytest.fixture
def skills(tmp_path):
    shutil.copytree(ROOT / "skills", tmp_path / "skills")
    return tmp_path / "skills"


@pytest.fixture
def opts(loopback, tmp_path):
    loopback.responder = responder()
    model = f"openai/agent-model@{loopback.openai_url}"
    return lambda **kw: RunOptions(
        model=model,
        judge_model=kw.pop("judge_model", f"openai/judge-model@{loopback.openai_url}"),
        cache=FileCache(tmp_path / "cache.json"),
        use_db=False,
        **kw,
    )


@pytest.mark.django_db
def test_a_passing_case_has_completion_and_judge_checks(skills, opts, loopback):
    results = run_suite(load_file(skills / "greeter" / "EVAL.md"), opts())
    assert [r.passed for r in results] == [True, True]
    assert [c.name for c in results[0].checks] == ["completion", "judge"]
    assert results[0].transcript["response"] == "Hello Sam, lovely to meet you!"
    assert "Greeter" in results[0].transcript["system"]  # the colocated SKILL.md is loaded
    assert results[0].usage["calls"] == 2 and loopback.count() == 4


@pytest.mark.django_db
def test_tools_are_offered_run_and_recorded(skills, opts, loopback):
    result = run_suite(load_file(skills / "fractions" / "EVAL.md"), opts())[0]
    assert result.passed
    assert result.transcript["tool_calls"] == [
        {
            "name": "add_fractions",
            "arguments": {"a_numerator": 1, "a_denominator": 4, "b_numerator": 2, "b_denominator": 4},
            "result": "3/4",
        }
    ]
    assert "You are tutoring a grade 5 student." in result.transcript["system"]
    offered = loopback.requests[0].body["tools"][0]["function"]
    assert (
        offered["name"] == "add_fractions"
        and offered["description"] == "Add two fractions and return the simplified sum as 'n/d'."
    )
    assert offered["parameters"]["required"] == ["a_numerator", "a_denominator", "b_numerator", "b_denominator"]
    assert offered["parameters"]["properties"]["a_numerator"] == {"type": "integer"}
    assert loopback.requests[1].body["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": '"3/4"'}


@pytest.mark.django_db
def test_fail_verdict_fails_and_warning_is_kept_on_a_pass(skills, opts, loopback):
    loopback.responder = responder(verdicts={"Hello there": "FAIL"}, warning="Adds an unnecessary caveat.\nsecond line")
    passed, failed = run_suite(load_file(skills / "greeter" / "EVAL.md"), opts())
    assert passed.passed and passed.warnings == ["Adds an unnecessary caveat."]
    assert not failed.passed and failed.checks[1].name == "judge" and not failed.checks[1].passed
    assert "FAILED judge: judged FAIL" in failed.failure_message() and "response: Hello Sam" in failed.failure_message()


@pytest.mark.django_db
def test_judge_off_skips_the_judge(skills, opts, loopback):
    results = run_suite(load_file(skills / "greeter" / "EVAL.md"), opts(judge=False))
    assert all(r.passed and [c.name for c in r.checks] == ["completion"] for r in results)
    assert loopback.count() == 2


@pytest.mark.django_db
def test_a_run_that_does_not_complete_is_not_judged(skills, opts, loopback):
    loopback.responder = lambda endpoint, body, n: Reply(status=401)
    result = run_suite(load_file(skills / "greeter" / "EVAL.md"), opts())[0]
    assert not result.passed and [c.name for c in result.checks] == ["completion"]
    assert "did not complete" in result.checks[0].detail and "401" in result.checks[0].detail


def calls_per_run(skills, opts, loopback, **kw):
    loopback.reset()
    loopback.responder = kw.pop("responder", responder())
    results = []
    for path in ("greeter/EVAL.md", "fractions/EVAL.md", "fractions/tools.eval.md"):
        results += run_suite(load_file(skills / path), opts(**kw))
    return loopback.count(), {f"{r.suite}: {r.case}": r.cached for r in results}


@pytest.mark.django_db
def test_cache_skips_unchanged_and_reruns_exactly_what_changed(skills, opts, loopback):
    first, cached = calls_per_run(skills, opts, loopback)
    assert first > 0 and not any(cached.values())
    second, cached = calls_per_run(skills, opts, loopback)
    assert second == 0 and all(cached.values())

    eval_md = skills / "greeter" / "EVAL.md"
    eval_md.write_text(eval_md.read_text().replace("warm and friendly tone", "warm tone"))
    _, cached = calls_per_run(skills, opts, loopback)
    assert [k for k, v in cached.items() if not v] == ["greeter: greets the user by name"]

    skill = skills / "greeter" / "SKILL.md"
    skill.write_text(skill.read_text() + "\nKeep it short.\n")
    _, cached = calls_per_run(skills, opts, loopback)
    assert [k for k, v in cached.items() if not v] == [
        "greeter: greets the user by name",
        "greeter: handles a missing name",
    ]

    tools = skills / "fractions" / "tools.py"
    tools.write_text(tools.read_text() + "\n# a change to the tool module\n")
    _, cached = calls_per_run(skills, opts, loopback)
    assert [k for k, v in cached.items() if not v] == [
        "fractions: adds fractions with the tool",
        "fractions: simplifies the sum",
        "tools: the tool module adds unlike denominators",
    ]

    _, cached = calls_per_run(skills, opts, loopback, judge_model=f"openai/another-judge@{loopback.openai_url}")
    assert not any(cached.values())


@pytest.mark.django_db
def test_failures_are_never_cached(skills, opts, loopback):
    failing = responder(verdicts={"Hello there": "FAIL"})
    calls_per_run(skills, opts, loopback, responder=failing)
    calls, cached = calls_per_run(skills, opts, loopback, responder=failing)
    assert [k for k, v in cached.items() if not v] == ["greeter: handles a missing name"] and calls == 2
