"""The EVAL.md parser: one test per rule, errors with file and line."""

import pytest

from evaluation.suites.parser import SuiteError, SuiteWarning, parse_suite


def parse(text, path="skills/x/EVAL.md"):
    return parse_suite(text, path)


def test_cases_open_at_level_two_headings_named_by_the_trimmed_rest():
    suite = parse("## first case   \n### Prompt\nhi\n### Expect\nhello\n##   second\n### Prompt\na\n### Expect\nb\n")
    assert [c.name for c in suite.cases] == ["first case", "second"]
    assert [c.line for c in suite.cases] == [1, 6]


def test_no_frontmatter_when_the_first_line_is_not_dashes():
    suite = parse("\n---\nmodel: x\n\n---\n## c\n### Prompt\np\n### Expect\ne\n")
    assert suite.frontmatter == {} and [c.name for c in suite.cases] == ["c"]


def test_frontmatter_keys_and_scalar_to_list():
    suite = parse(
        '---\nskills: "skills/greeter"\ntools:\n  - a.b\nmodel: "anthropic:claude"\nsystem: Be brief.\nmetadata: {owner: me}\n---\n## c\n### Prompt\np\n### Expect\ne\n'
    )
    assert suite.frontmatter == {
        "skills": ["skills/greeter"],
        "tools": ["a.b"],
        "model": "anthropic:claude",
        "system": "Be brief.",
        "metadata": {"owner": "me"},
    }


def test_unclosed_frontmatter_is_an_error_at_line_1():
    with pytest.raises(SuiteError, match=r"^skills/x/EVAL.md:1: frontmatter opened with '---' is never closed"):
        parse("---\nmodel: x\n## c\n### Prompt\np\n### Expect\ne\n")


def test_unknown_frontmatter_keys_are_kept_with_a_warning_naming_their_line():
    with pytest.warns(SuiteWarning) as caught:
        suite = parse("---\nname: greeter\nmodel: x\nmodle: y\n---\n## c\n### Prompt\np\n### Expect\ne\n")
    assert [str(w.message).split(" is kept")[0] for w in caught] == [
        "skills/x/EVAL.md:2: unknown frontmatter key 'name'",
        "skills/x/EVAL.md:4: unknown frontmatter key 'modle'",
    ]
    assert suite.frontmatter == {"name": "greeter", "model": "x", "modle": "y"}
    assert [c.name for c in suite.cases] == ["c"]


def test_frontmatter_values_stay_json_compatible():
    suite = parse("---\nmetadata: {since: 2024-05-01}\n---\n")
    assert suite.frontmatter == {"metadata": {"since": "2024-05-01"}}


def test_invalid_frontmatter_yaml_is_an_error():
    with pytest.raises(SuiteError, match=r"EVAL.md:\d+: frontmatter is not valid YAML"):
        parse("---\nskills: [unclosed\n---\n")


def test_wrong_frontmatter_types_are_errors():
    with pytest.raises(SuiteError, match="tools: must be a string or a list of strings"):
        parse("---\ntools: {a: 1}\n---\n")
    with pytest.raises(SuiteError, match="model: must be a string"):
        parse("---\nmodel: [a]\n---\n")


@pytest.mark.parametrize(
    ("prompt", "expect"),
    [
        ("### Prompt", "### Expect"),
        ("## prompt", "## EXPECT"),
        ("# PROMPT", "###### expect"),
        ("#### Prompt ##", "#### Expect ####"),
    ],
)
def test_prompt_and_expect_headings_of_any_level_and_case_are_markers(prompt, expect):
    suite = parse(f"## c\n{prompt}\nthe prompt\n{expect}\nthe rubric\n")
    assert (suite.cases[0].prompt, suite.cases[0].expect) == ("the prompt", "the rubric")
    assert len(suite.cases) == 1


def test_other_headings_inside_a_section_stay_in_its_content():
    suite = parse("## c\n### Prompt\n### Step 1\ndo this\n# Big\n### Expect\nok\n")
    assert suite.cases[0].prompt == "### Step 1\ndo this\n# Big"


def test_another_level_two_heading_starts_a_new_case():
    suite = parse("## a\n### Prompt\np\n### Expect\ne\n## b\n### Prompt\nq\n### Expect\nf\n")
    assert [c.expect for c in suite.cases] == ["e", "f"]


def test_text_before_the_first_case_is_ignored():
    suite = parse("# Suite title\nSome intro.\n### Prompt\nnot a case\n## c\n### Prompt\np\n### Expect\ne\n")
    assert len(suite.cases) == 1 and suite.cases[0].prompt == "p"


def test_text_before_a_cases_first_section_is_ignored():
    suite = parse("## c\nnotes for authors\n### Prompt\np\n### Expect\ne\n")
    assert suite.cases[0].prompt == "p"


def test_a_repeated_section_appends_to_the_first():
    suite = parse("## c\n### Prompt\nfirst\n### Expect\nrubric\n### Prompt\nsecond\n")
    assert suite.cases[0].prompt == "first\nsecond"


def test_sections_are_trimmed():
    suite = parse("## c\n### Prompt\n\n\n   padded   \n\n### Expect\n\n  e  \n\n")
    assert (suite.cases[0].prompt, suite.cases[0].expect) == ("padded", "e")


def test_missing_prompt_is_an_error_naming_case_and_section():
    with pytest.raises(SuiteError, match=r"EVAL.md:1: case 'c': the Prompt section is missing"):
        parse("## c\n### Expect\ne\n")


def test_empty_expect_is_an_error_naming_case_and_section():
    with pytest.raises(SuiteError, match=r"EVAL.md:6: case 'd': the Expect section is empty"):
        parse("## c\n### Prompt\np\n### Expect\ne\n## d\n### Prompt\nq\n### Expect\n   \n### Expect\n")


def test_prompt_is_checked_before_expect():
    with pytest.raises(SuiteError, match="the Prompt section is missing"):
        parse("## c\nnothing here\n")


def test_no_cases_is_an_empty_suite():
    assert parse("# Just a title\nSome words.\n").cases == []
    assert parse("").cases == []


def test_headings_inside_code_fences_are_content():
    suite = parse("## c\n### Prompt\n```markdown\n## not a case\n### Expect\n```\n### Expect\ne\n")
    assert len(suite.cases) == 1 and "## not a case" in suite.cases[0].prompt and suite.cases[0].expect == "e"


def test_duplicate_case_names_are_an_error():
    with pytest.raises(SuiteError, match="EVAL.md:6: case 'c' is already defined at line 1"):
        parse("## c\n### Prompt\np\n### Expect\ne\n## c\n### Prompt\np\n### Expect\ne\n")


def test_hash_without_space_is_not_a_heading():
    suite = parse("## c\n### Prompt\n##notaheading\n### Expect\ne\n")
    assert suite.cases[0].prompt == "##notaheading"


def test_labels_for_folder_suites_and_sidecars():
    assert parse("", "skills/greeter/EVAL.md").label == "greeter"
    assert parse("", "skills/fractions/tools.eval.md").label == "tools"
