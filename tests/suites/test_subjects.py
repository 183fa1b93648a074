"""What a suite tests: the SKILL.md or AGENT.md beside any suite file, not only one named EVAL.md."""

import pytest

from evaluation.suites import load_file
from evaluation.suites.subjects import resolve_subject

CASE = "## c\n### Prompt\np\n### Expect\ne\n"


@pytest.mark.parametrize("name", ["EVAL.md", "foo.eval.md", "foo.EVAL.md"])
def test_a_skill_beside_any_suite_file_is_loaded(tmp_path, name):
    (tmp_path / "SKILL.md").write_text("# Greeter\nGreet people by name.\n")
    (tmp_path / name).write_text(CASE)
    subject = resolve_subject(load_file(tmp_path / name))
    assert subject.skills == [(tmp_path.name, "# Greeter\nGreet people by name.\n")]
    assert list(subject.sources) == ["skill:SKILL.md"]


@pytest.mark.parametrize("name", ["EVAL.md", "foo.eval.md", "foo.EVAL.md"])
def test_an_agent_beside_any_suite_file_is_booted(tmp_path, name):
    (tmp_path / "AGENT.md").write_text("You are a homework buddy.\n")
    (tmp_path / "skills" / "maths").mkdir(parents=True)
    (tmp_path / "skills" / "maths" / "SKILL.md").write_text("Show your working.\n")
    (tmp_path / name).write_text(CASE)
    subject = resolve_subject(load_file(tmp_path / name))
    assert subject.identity == "You are a homework buddy.\n"
    assert subject.skills == [("maths", "Show your working.\n")]


def test_frontmatter_skills_win_over_the_one_beside_the_file(tmp_path):
    (tmp_path / "SKILL.md").write_text("beside\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "SKILL.md").write_text("named\n")
    (tmp_path / "foo.eval.md").write_text("---\nskills: other\n---\n" + CASE)
    assert resolve_subject(load_file(tmp_path / "foo.eval.md")).skills == [("other", "named\n")]


def test_a_suite_file_that_is_not_an_eval_file_loads_nothing_beside_it(tmp_path):
    (tmp_path / "SKILL.md").write_text("beside\n")
    (tmp_path / "notes.md").write_text(CASE)
    assert resolve_subject(load_file(tmp_path / "notes.md")).skills == []
