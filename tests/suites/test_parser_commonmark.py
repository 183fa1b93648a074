"""The EVAL.md body is CommonMark: headings and code fences as markdown-it reads them."""

import pytest

from evaluation.suites.parser import SuiteError, parse_suite

NESTED_FENCES = """\
## shows a README
### Prompt
Tidy this README:

````markdown
# Project

```markdown
## heading
Some text.
```
````
### Expect
The README keeps its code block.
"""


def parse(text):
    return parse_suite(text, "skills/x/EVAL.md")


def test_a_longer_fence_holds_a_shorter_one_and_its_headings():
    suite = parse(NESTED_FENCES)
    assert [c.name for c in suite.cases] == ["shows a README"]
    prompt = suite.cases[0].prompt
    assert prompt == "Tidy this README:\n\n````markdown\n# Project\n\n```markdown\n## heading\nSome text.\n```\n````"
    assert suite.cases[0].expect == "The README keeps its code block."


def test_a_fence_line_with_an_info_string_does_not_close_the_fence():
    suite = parse("## c\n### Prompt\n```\none\n```python\n## not a case\n### Expect\n```\n### Expect\ne\n")
    assert [c.name for c in suite.cases] == ["c"]
    assert suite.cases[0].prompt == "```\none\n```python\n## not a case\n### Expect\n```"
    assert suite.cases[0].expect == "e"


def test_tilde_fences_are_content_too():
    suite = parse("## c\n### Prompt\n~~~~\n~~~\n## inside\n~~~~\n### Expect\ne\n")
    assert suite.cases[0].prompt == "~~~~\n~~~\n## inside\n~~~~"


def test_a_hash_without_a_space_before_it_is_part_of_the_case_name():
    suite = parse("## answers in C#\n### Prompt\np\n### Expect\ne\n## counts ##\n### Prompt\np\n### Expect\ne\n")
    assert [c.name for c in suite.cases] == ["answers in C#", "counts"]


def test_setext_headings_are_cases_and_section_markers():
    suite = parse("greets by name\n--------------\nPrompt\n======\nHi, I'm Sam\n\nExpect\n------\nUses the name.\n")
    assert [(c.name, c.line, c.prompt, c.expect) for c in suite.cases] == [
        ("greets by name", 1, "Hi, I'm Sam", "Uses the name.")
    ]


def test_a_setext_level_one_heading_is_not_a_case():
    suite = parse("Suite title\n===========\n## c\n### Prompt\np\n### Expect\ne\n")
    assert [c.name for c in suite.cases] == ["c"]


def test_headings_inside_quotes_and_lists_are_content():
    suite = parse("## c\n### Prompt\n> ## quoted\n- ## listed\n### Expect\ne\n")
    assert [c.name for c in suite.cases] == ["c"] and suite.cases[0].prompt == "> ## quoted\n- ## listed"


def test_an_unclosed_fence_is_an_error_at_its_opening_line():
    text = "---\nmodel: x\n---\n## c\n### Prompt\nRun this:\n```bash\nls\n### Expect\nLists the files.\n"
    with pytest.raises(SuiteError, match=r"^skills/x/EVAL.md:7: the code fence opened here with '```' is never closed"):
        parse(text)


def test_an_unclosed_fence_on_the_last_line_is_an_error():
    with pytest.raises(SuiteError, match=r"EVAL.md:5: the code fence opened here with '````' is never closed"):
        parse("## c\n### Prompt\np\n### Expect\n````\n")


def test_a_shorter_fence_line_does_not_close_a_longer_fence():
    with pytest.raises(SuiteError, match=r"EVAL.md:3: the code fence opened here with '````' is never closed"):
        parse("## c\n### Prompt\n````\n```\n### Expect\ne\n```\n")


def test_a_fence_closed_on_the_last_line_is_fine():
    suite = parse("## c\n### Prompt\np\n### Expect\n```\ne\n```")
    assert suite.cases[0].expect == "```\ne\n```"


def test_lines_count_from_the_top_of_the_file_after_frontmatter():
    suite = parse("---\nmodel: x\n---\n\n## c\n### Prompt\np\n### Expect\ne\n")
    assert suite.cases[0].line == 5
    with pytest.raises(SuiteError, match=r"EVAL.md:10: case 'd': the Prompt section is missing"):
        parse("---\nmodel: x\n---\n\n## c\n### Prompt\np\n### Expect\ne\n## d\nd\n")


def test_windows_line_endings():
    suite = parse("## c\r\n### Prompt\r\nline one\r\nline two\r\n### Expect\r\ne\r\n")
    assert (suite.cases[0].prompt, suite.cases[0].expect) == ("line one\nline two", "e")


def test_repeated_sections_join_their_lines():
    suite = parse("## c\n### Prompt\nfirst\n### Expect\nrubric\n### Prompt\nsecond\n### Expect\nmore\n")
    assert (suite.cases[0].prompt, suite.cases[0].expect) == ("first\nsecond", "rubric\nmore")


def test_repeated_sections_join_with_one_newline_whatever_blank_lines_stood_between():
    text = "## c\n### Prompt\nfirst\n\n\n### Expect\nrubric\n\n### Prompt\n\nsecond\n\n### Expect\nmore\n"
    suite = parse(text)
    assert (suite.cases[0].prompt, suite.cases[0].expect) == ("first\nsecond", "rubric\nmore")
