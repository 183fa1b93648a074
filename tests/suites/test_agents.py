"""Whole agents (spec 003): paths from the project root, sub-agents as tools, the agent's own
model, and model errors that fail a case instead of the command. Real SDKs, loopback server."""

import json
from pathlib import Path

import pytest

from evaluation.providers.loopback import Reply
from evaluation.suites import RunOptions, load_file, run_suite
from evaluation.suites.cache import fingerprint
from evaluation.suites.subjects import resolve_subject

ROOT = Path(__file__).resolve().parents[2]
CASE = "## finds the library\n### Prompt\nWhich logging library do we use?\n### Expect\nNames the library.\n"
pytestmark = pytest.mark.django_db


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def lead(tmp_path):
    """agents/lead: an AGENT.md with frontmatter, a skill of its own, and a researcher sub-agent
    (its own AGENT.md and skill) that it can delegate to."""
    folder = tmp_path / "agents" / "lead"
    write(folder / "AGENT.md", "---\nname: lead\ndescription: plans the work\n---\n# Lead\nYou lead the team.\n")
    write(folder / "skills" / "planning" / "SKILL.md", "Plan before acting.\n")
    write(
        folder / "agents" / "researcher" / "AGENT.md",
        "---\ndescription: reads the code base and cites files\n---\n# Researcher\nYou read code.\n",
    )
    write(folder / "agents" / "researcher" / "skills" / "citing" / "SKILL.md", "Cite the file you read.\n")
    write(folder / "EVAL.md", CASE)
    return folder


def delegating(endpoint, body, n):
    """The lead delegates once, then reports; the researcher answers; the judge passes."""
    messages = body.get("messages") or []
    system = messages[0]["content"] if messages else ""
    if "verdict" in json.dumps(body.get("response_format") or {}):
        return Reply(json={"verdict": "PASS", "reason": "named it", "warning": None})
    if "You read code." in system:
        return Reply(text="structlog, configured in app/logging.py")
    if any(m.get("role") == "tool" for m in messages):
        return Reply(text="We use " + messages[-1]["content"])
    return Reply(tool_calls=[{"name": "delegate_to_researcher", "arguments": {"task": "Find the logging library."}}])


def test_sub_agents_are_tools_the_agent_delegates_to(lead, loopback):
    loopback.responder = delegating
    model = f"openai/m@{loopback.openai_url}"
    [result] = run_suite(load_file(lead / "EVAL.md"), RunOptions(model=model, judge_model=model, use_db=False))
    assert result.passed, result.failure_message()
    first = loopback.requests[0].body
    assert [t["function"]["name"] for t in first["tools"]] == ["delegate_to_researcher"]
    assert "reads the code base and cites files" in first["tools"][0]["function"]["description"]
    parent_system = first["messages"][0]["content"]
    # the lead's own identity and skill, not the researcher's
    assert "You lead the team." in parent_system and "Plan before acting." in parent_system
    assert "You read code." not in parent_system and "Cite the file" not in parent_system
    assert "name: lead" not in parent_system  # frontmatter is not identity
    researcher = loopback.requests[1].body["messages"]
    assert "You read code." in researcher[0]["content"] and "Cite the file you read." in researcher[0]["content"]
    assert researcher[1] == {"role": "user", "content": "Find the logging library."}
    [call] = result.transcript["tool_calls"]
    assert call["agent"] == "researcher" and call["result"] == "structlog, configured in app/logging.py"
    assert result.transcript["response"] == 'We use "structlog, configured in app/logging.py"'


def test_every_sub_agent_file_is_in_the_fingerprint(lead):
    suite = load_file(lead / "EVAL.md")

    def key():
        subject = resolve_subject(suite)
        return fingerprint(suite, suite.cases[0], subject, agent_model="a", judge_model="j", judge=True)

    before = key()
    sub_agent_md = lead / "agents" / "researcher" / "AGENT.md"
    sub_agent_md.write_text(sub_agent_md.read_text() + "Be brief.\n")
    after_agent = key()
    skill = lead / "agents" / "researcher" / "skills" / "citing" / "SKILL.md"
    skill.write_text("Cite the line too.\n")
    after_skill = key()
    assert len({before, after_agent, after_skill}) == 3


def test_the_agents_own_model_is_used_when_neither_run_nor_suite_names_one(tmp_path, loopback):
    loopback.responder = lambda endpoint, body, n: Reply(text="Try 7 x 4 first, then double it.")
    folder = tmp_path / "agents" / "buddy"
    write(folder / "AGENT.md", f"---\nmodel: openai/own-model@{loopback.openai_url}\n---\nYou are a buddy.\n")
    write(folder / "EVAL.md", CASE)
    [result] = run_suite(load_file(folder / "EVAL.md"), RunOptions(judge=False, use_db=False))
    assert result.passed and result.agent_model == "openai/own-model"
    request = loopback.requests[0].body
    assert request["model"] == "own-model"
    assert "model:" not in request["messages"][0]["content"]
    # the run's model wins over the agent's
    loopback.reset()
    run_suite(
        load_file(folder / "EVAL.md"),
        RunOptions(model=f"openai/run-model@{loopback.openai_url}", judge=False, use_db=False),
    )
    assert [r.body["model"] for r in loopback.requests] == ["run-model"]
    # and so does the suite's frontmatter model
    loopback.reset()
    (folder / "EVAL.md").write_text(f"---\nmodel: openai/suite-model@{loopback.openai_url}\n---\n{CASE}")
    run_suite(load_file(folder / "EVAL.md"), RunOptions(judge=False, use_db=False))
    assert [r.body["model"] for r in loopback.requests] == ["suite-model"]


def test_a_model_that_cannot_be_built_fails_the_case_not_the_run(tmp_path, monkeypatch, loopback):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    loopback.responder = lambda endpoint, body, n: Reply(text="Hello!")
    write(tmp_path / "agents" / "claude" / "AGENT.md", "---\nmodel: anthropic:claude-sonnet-4-6\n---\nHi.\n")
    write(tmp_path / "agents" / "claude" / "EVAL.md", CASE + "\n## second\n### Prompt\nHello\n### Expect\nGreets.\n")
    results = run_suite(load_file(tmp_path / "agents" / "claude" / "EVAL.md"), RunOptions(use_db=False))
    assert [r.passed for r in results] == [False, False]
    for result in results:
        [check] = result.checks  # not judged
        assert check.name == "completion" and not check.passed
        assert check.detail == "the agent could not be built: anthropic: set ANTHROPIC_API_KEY to use this provider"
    assert loopback.count() == 0
    # a judge that cannot be built fails the judge check the same way
    model = f"openai/m@{loopback.openai_url}"
    write(tmp_path / "skills" / "x" / "EVAL.md", CASE)
    [result] = run_suite(
        load_file(tmp_path / "skills" / "x" / "EVAL.md"), RunOptions(model=model, judge_model="anthropic", use_db=False)
    )
    assert [(c.name, c.passed) for c in result.checks] == [("completion", True), ("judge", False)]
    assert "the judge could not be built: anthropic: set ANTHROPIC_API_KEY" in result.checks[1].detail


def test_paths_resolve_beside_the_suite_then_from_the_project_root(tmp_path, monkeypatch):
    """The spec's own example, `skills: ["skills/greeter"]`, from a suite in another folder; and a
    `module:` file named from the root while the working folder is elsewhere."""
    monkeypatch.chdir(tmp_path)
    suite_file = write(
        tmp_path / "evals" / "EVAL.md",
        "---\nskills: [skills/greeter]\nmodule: skills/fractions/tools.py\n---\n" + CASE,
    )
    subject = resolve_subject(load_file(suite_file))
    assert subject.skills[0][0] == "greeter" and "Greet" in subject.skills[0][1]
    assert subject.module == "skills/fractions/tools.py"
    # beside the suite wins over the root
    write(tmp_path / "evals" / "skills" / "greeter" / "SKILL.md", "the local greeter\n")
    assert resolve_subject(load_file(suite_file)).skills == [("greeter", "the local greeter\n")]


def test_a_path_found_nowhere_names_both_places(tmp_path):
    suite_file = write(tmp_path / "evals" / "EVAL.md", "---\nmodule: nowhere/tools.py\n---\n" + CASE)
    with pytest.raises(Exception) as error:
        resolve_subject(load_file(suite_file))
    assert str(error.value) == (
        f"{suite_file}: module: no file nowhere/tools.py beside the suite ({suite_file.parent}) "
        f"or in the project root ({ROOT})"
    )


def test_two_sub_agents_offered_under_one_tool_name_are_an_error(lead):
    write(lead / "team" / "researcher" / "AGENT.md", "Another researcher.\n")
    with pytest.raises(Exception, match=r"EVAL.md: agent: the sub-agents in .*agents/researcher and .*team/researcher"):
        resolve_subject(load_file(lead / "EVAL.md"))
    (lead / "team" / "researcher" / "AGENT.md").write_text("---\nname: second researcher\n---\nAnother researcher.\n")
    subject = resolve_subject(load_file(lead / "EVAL.md"))
    assert [a.tool_name for a in subject.subagents] == ["delegate_to_researcher", "delegate_to_second_researcher"]


def test_fingerprints_do_not_depend_on_where_the_checkout_is(tmp_path, monkeypatch):
    """A cache committed from one checkout (or CI's) is hit from another place, and whether the
    suite was named by a relative or an absolute path does not matter."""
    import shutil

    keys = []
    for where in ("one", "two"):
        shutil.copytree(ROOT / "agents", tmp_path / where / "agents")
        shutil.copytree(ROOT / "skills", tmp_path / where / "skills")
    monkeypatch.chdir(tmp_path / "two")
    for path in (tmp_path / "one" / "agents" / "homework-buddy" / "EVAL.md", Path("agents/homework-buddy/EVAL.md")):
        suite = load_file(path)
        subject = resolve_subject(suite)
        keys.append(fingerprint(suite, suite.cases[0], subject, agent_model="a", judge_model="j", judge=True))
    assert keys[0] == keys[1]
