"""The drift verdict rules on values built here, without a database or a harness run: the bootstrap
interval against a percentile bootstrap written out with numpy, the regression rule at its boundaries,
every printed verdict word, the reports' exact text, and every way a baseline's setup can differ.

Fast on purpose: mutation testing (docs/drift.md) runs these for each mutant of the verdict code."""

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from evaluation.drift.baselines import (
    Baseline,
    JudgeConfig,
    Setup,
    baseline_file,
    read_baseline,
    setup_mismatches,
    write_baseline,
)
from evaluation.drift.harness import (
    AgentVerdict,
    Report,
    Row,
    _proposition_key,
    _status,
    _verdict,
    bootstrap_ci,
    judge_words,
    junit,
    markdown,
    replay_judge,
    report_problems,
    report_summary,
    report_verdicts,
    row_delta,
    row_incomplete,
    row_regression,
    row_score,
    rule_text,
    setup_check,
)
from evaluation.errors import InvalidInput
from evaluation.providers import ProviderSpec

# Twelve scores whose interval moves in the third decimal when the resample count or the seed changes.
SPREAD = [5.69, 3.49, 5.32, 6.03, 3.15, 7.94, 6.48, 7.73, 3.76, 4.66, 3.57, 2.28]


def percentile_bootstrap(samples: list[float], seed: int = 0, resamples: int = 2000) -> tuple[float, float]:
    """Efron's percentile bootstrap of the mean: `resamples` resamples of the indices drawn with replacement
    by numpy's Generator seeded `seed` (the draws scipy.stats.bootstrap makes with rng=seed), each resample's
    mean, and the 2.5th and 97.5th percentiles (linear interpolation), rounded as the reports keep them."""
    data = np.asarray(samples)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), (resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return round(float(low), 3), round(float(high), 3)


def row(baseline, samples, **kw) -> Row:
    kw.setdefault("rule", "interval")
    kw.setdefault("repeats", max(len(samples), 1))
    return Row(kw.pop("agent", "rex"), kw.pop("dimension", "adherence"), baseline, samples, **kw)


# --- the interval ---------------------------------------------------------------------------------------


def test_bootstrap_ci_is_the_seeded_percentile_interval_of_the_mean_to_three_decimals():
    expected = percentile_bootstrap(SPREAD)
    assert bootstrap_ci(SPREAD) == expected == (4.063, 6.036)
    # The same procedure with another seed, count or level gives another interval: these numbers pin them.
    assert percentile_bootstrap(SPREAD, resamples=2001) != expected
    assert percentile_bootstrap(SPREAD, resamples=1999) != expected
    assert percentile_bootstrap(SPREAD, seed=1) != expected
    mean = sum(SPREAD) / len(SPREAD)
    assert expected[0] < mean < expected[1]


def test_bootstrap_ci_needs_two_samples_and_is_a_point_without_spread():
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([5.0]) is None
    assert bootstrap_ci([4.0, 6.5]) == percentile_bootstrap([4.0, 6.5]) == (4.0, 6.5)
    assert bootstrap_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)
    assert bootstrap_ci([7.25, 7.25]) == (7.25, 7.25)


# --- one row's figures and rule -------------------------------------------------------------------------


def test_score_is_the_mean_of_the_repeats_to_three_decimals():
    assert row_score(row(6.0, [6.1, 6.3, 5.8])) == 6.067  # 18.2 / 3
    assert row_score(row(6.0, [])) is None


def test_delta_is_score_minus_baseline_to_three_decimals():
    assert row_delta(row(5.0001, [6.1, 6.3, 5.8])) == 1.067  # 6.067 - 5.0001 = 1.0669
    assert row_delta(row(7.5, [6.0, 5.0])) == -2.0
    assert row_delta(row(None, [6.0])) is None
    assert row_delta(row(6.0, [])) is None


def test_no_baseline_is_never_a_regression():
    assert row_regression(row(None, [])) is False
    assert row_regression(row(None, [0.0], rule="fixed")) is False


def test_a_baseline_without_a_score_is_a_regression():
    assert row_regression(row(6.0, [], repeats=2)) is True


def test_a_drop_of_exactly_the_threshold_is_not_a_regression_and_a_larger_one_is():
    assert row_regression(row(6.0, [5.0], rule="fixed")) is False  # delta -1.0: not more than 1.0
    assert row_regression(row(6.0, [4.999], rule="fixed")) is True
    assert row_regression(row(6.0, [5.5], rule="fixed", threshold=0.5)) is False
    assert row_regression(row(6.0, [5.4], rule="fixed", threshold=0.5)) is True
    assert row_regression(row(6.0, [6.5], rule="fixed")) is False  # a rise
    assert row_regression(row(6.0, [5.5], rule="fixed")) is False  # a drop within the threshold


def test_under_the_interval_rule_the_whole_interval_must_lie_below_the_baseline():
    low, high = percentile_bootstrap(SPREAD)  # mean 5.008
    # A baseline at the interval's top: the drop is 1.028 > 1.0, but the interval touches the baseline.
    assert row_regression(row(high, SPREAD)) is False
    assert row_regression(row(high + 0.001, SPREAD)) is True
    # The fixed rule looks at the drop alone.
    assert row_regression(row(high, SPREAD, rule="fixed")) is True
    # One repeat has no interval: the fixed rule applies.
    assert row_regression(row(6.2, [5.0])) is True
    assert low < high


def test_a_row_scored_by_some_repeats_but_not_all_is_incomplete():
    assert row_incomplete(row(6.0, [5.0], repeats=2)) is True
    assert row_incomplete(row(6.0, [5.0, 5.0], repeats=2)) is False
    assert row_incomplete(row(6.0, [], repeats=2)) is False  # unscored, not incomplete
    assert row_incomplete(row(6.0, [5.0, 5.0], repeats=3)) is True


# --- the printed verdict of a row -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "r, verdict",
    [
        (row(6.0, [4.0], rule="fixed"), "regression"),
        (row(6.0, [], repeats=2), "no score"),
        (row(6.0, [5.5], repeats=2), "incomplete: 1 of 2 repeats"),
        (row(None, [5.5]), "no baseline"),
        (row(None, []), "unscored"),
        (row(None, [5.5, 6.0], repeats=3), "incomplete: 2 of 3 repeats"),
        (row(percentile_bootstrap(SPREAD)[1], SPREAD), "ok (within the noise)"),
        (row(6.0, [5.0], rule="fixed"), "ok"),
        (row(6.0, [5.5]), "ok"),
        (row(6.0, [7.0]), "ok"),
    ],
)
def test_each_row_verdict_in_words(r, verdict):
    assert _verdict(r) == verdict
    assert _status(r) == verdict


def test_a_forced_row_says_so_unless_it_had_no_baseline():
    assert _status(row(6.0, [4.0], rule="fixed", forced=True)) == "regression (forced comparison)"
    assert _status(row(6.0, [6.0], forced=True)) == "ok (forced comparison)"
    assert _status(row(None, [6.0], forced=True)) == "no baseline"


# --- the rule and the judge in words --------------------------------------------------------------------


def test_rule_text_in_words():
    assert rule_text("interval", 2, 1.0) == (
        "a drop of more than 1.0 whose bootstrap 95% CI over 2 repeats lies below the baseline"
    )
    assert rule_text("interval", 5, 0.25) == (
        "a drop of more than 0.2 whose bootstrap 95% CI over 5 repeats lies below the baseline"
    )
    assert rule_text("interval", 1, 1.0) == (
        "a drop of more than 1.0 below the baseline (one repeat: no interval, so the fixed rule)"
    )
    assert rule_text("fixed", 3, 1.5) == "a drop of more than 1.5 below the baseline"
    assert rule_text("fixed", 1, 1.0) == "a drop of more than 1.0 below the baseline"


def test_judge_words_name_the_offline_judge_plainly():
    assert judge_words(JudgeConfig("offline", "offline-rules-v1", "v3")) == (
        "offline/offline-rules-v1 (the offline rule-based judge: no LLM)"
    )
    assert judge_words(JudgeConfig("openai", "gpt-4o", "v3")) == "openai/gpt-4o"


def test_replay_judge_replays_the_baselines_recordings_else_the_offline_model(tmp_path):
    options = {"dir": str(tmp_path / "recordings")}
    recorded = Baseline("rex", {"adherence": 6.0}, judge=JudgeConfig("openai", "gpt-4o", "v3"))
    assert replay_judge(tmp_path, recorded) == ProviderSpec("replay", "gpt-4o", options=options)
    assert replay_judge(tmp_path, None) == ProviderSpec("replay", "offline-rules-v1", options=options)
    no_model = Baseline("rex", {"adherence": 6.0}, judge=JudgeConfig("openai"))
    assert replay_judge(tmp_path, no_model) == ProviderSpec("replay", "offline-rules-v1", options=options)
    no_judge = Baseline("rex", {"adherence": 6.0})
    assert replay_judge(tmp_path, no_judge) == ProviderSpec("replay", "offline-rules-v1", options=options)


def test_a_baseline_key_finds_its_dimension():
    found = {("consistency", "c2"), ("fluency", "c2"), ("fluency", "f1")}
    dims = ["adherence", "consistency", "fluency"]
    assert _proposition_key("adherence/a1", dims, found) == ("adherence", "a1")
    assert _proposition_key("c2", dims, found) == ("consistency", "c2")  # the first dimension that has it
    assert _proposition_key("f1", dims, found) == ("fluency", "f1")
    assert _proposition_key("gone", dims, found) == ("?", "gone")
    assert _proposition_key("other/f1", dims, found) == ("?", "other/f1")  # not a dimension of this run


# --- setups -----------------------------------------------------------------------------------------------

JUDGE = JudgeConfig("openai", "gpt-4o", "v3")
SETUP = Setup(JUDGE, {"adherence": "r1", "consistency": "r2"}, 20)


def baseline(**kw) -> Baseline:
    kw.setdefault("judge", JUDGE)
    kw.setdefault("rubric", {"adherence": "r1", "consistency": "r2"})
    kw.setdefault("max_messages", 20)
    return Baseline(kw.pop("agent_id", "rex"), kw.pop("dimensions", {"adherence": 6.0}), **kw)


def test_a_baseline_of_the_same_setup_matches():
    assert setup_mismatches(baseline(), SETUP) == []
    # A dimension the run no longer scores is not a difference of the rubric it still scores.
    assert setup_mismatches(baseline(rubric={"adherence": "r1", "convergence": "r9"}), SETUP) == []
    # A proposition id may hold a slash: the dimension is what comes before the first one.
    assert setup_mismatches(baseline(proposition_scores={"consistency/c/1": 4.0}), SETUP) == []


def test_a_baseline_that_records_nothing_of_its_setup_differs_in_every_part():
    assert setup_mismatches(baseline(judge=None, rubric={}, max_messages=None), SETUP) == [
        "the baseline does not record which judge scored it (this run's judge is openai/gpt-4o (prompt v3))",
        "the baseline does not record the versions of its proposition sets (rubric)",
        "the baseline does not record its window (max_messages)",
    ]


@pytest.mark.parametrize(
    "judge, reason",
    [
        (JudgeConfig("anthropic", "claude", "v3"), "the baseline was scored by anthropic/claude (prompt v3)"),
        (JudgeConfig("openai", "gpt-4o-mini", "v3"), "the baseline was scored by openai/gpt-4o-mini (prompt v3)"),
        (JudgeConfig("openai", "gpt-4o", "v2"), "the baseline was scored by openai/gpt-4o (prompt v2)"),
        (
            JudgeConfig("openai", "gpt-4o"),
            "the baseline was scored by openai/gpt-4o, and does not record its judge prompt version",
        ),
        (
            JudgeConfig("", "gpt-4o"),
            "the baseline was scored by gpt-4o, and does not record its provider, judge prompt version",
        ),
        (
            JudgeConfig(""),
            "the baseline was scored by ?, and does not record its provider, model, judge prompt version",
        ),
    ],
)
def test_each_judge_difference_is_named(judge, reason):
    assert setup_mismatches(baseline(judge=judge), SETUP) == [
        f"{reason} (this run's judge is openai/gpt-4o (prompt v3))"
    ]


def test_an_unrecorded_part_differs_even_where_the_run_leaves_it_out_too():
    partial = JudgeConfig("offline", "offline-rules-v1")
    setup = Setup(partial, SETUP.rubric, 20)
    assert setup_mismatches(baseline(judge=partial), setup) == [
        "the baseline was scored by offline/offline-rules-v1, and does not record its judge prompt version "
        "(this run's judge is offline/offline-rules-v1)"
    ]


def test_each_rubric_and_window_difference_is_named():
    b = baseline(
        dimensions={"fluency": 6.0, "adherence": 5.0},
        proposition_scores={"convergence/v1": 4.0, "consistency/c1": 5.0, "bare": 3.0},
        rubric={"adherence": "r0", "consistency": "r2"},
        max_messages=10,
    )
    assert setup_mismatches(b, SETUP) == [
        "the baseline does not record the version of the convergence propositions",
        "the baseline does not record the version of the fluency propositions",
        "the adherence propositions changed (rubric r0 in the baseline, r1 now)",
        "the baseline judged the last 10 messages, this run the last 20",
    ]


def test_setup_check_refuses_every_difference_unless_forced():
    setups = {"ivy": SETUP, "rex": SETUP, "bare": SETUP, "new": SETUP}
    baselines = {
        "rex": baseline(max_messages=10),
        "ivy": baseline(agent_id="ivy", judge=JudgeConfig("anthropic", "claude", "v3")),
        "bare": baseline(agent_id="bare", dimensions={}, max_messages=None),  # nothing to compare: not checked
        "new": None,
    }
    with pytest.raises(ValueError) as refused:
        setup_check(baselines, setups, force=False)
    assert str(refused.value) == (
        "setup: this run's judge is openai/gpt-4o (prompt v3), judging the last 20 messages; "
        "ivy: the baseline was scored by anthropic/claude (prompt v3) (this run's judge is openai/gpt-4o "
        "(prompt v3)); rex: the baseline judged the last 10 messages, this run the last 20. Scores from another "
        "setup are not comparable: record new baselines with drift_baseline, or pass --force to compare anyway "
        "(every report then says so)."
    )
    assert setup_check(baselines, setups, force=True) == {
        "ivy": [
            "the baseline was scored by anthropic/claude (prompt v3) (this run's judge is openai/gpt-4o (prompt v3))"
        ],
        "rex": ["the baseline judged the last 10 messages, this run the last 20"],
    }
    assert setup_check({"rex": baseline(), "new": None}, setups, force=False) == {}


def test_a_judge_label_parses_into_provider_and_model():
    assert JudgeConfig.from_label("anthropic/claude-opus-4-6", "v3") == JudgeConfig(
        "anthropic", "claude-opus-4-6", "v3"
    )
    assert JudgeConfig.from_label("offline") == JudgeConfig("offline", "", "")


# --- an agent's verdict, the problems, the summary --------------------------------------------------------


def report(**kw) -> Report:
    kw.setdefault("mode", "live")
    kw.setdefault("baselines_dir", "/b")
    return Report(**kw)


def test_each_agent_verdict():
    r = report(
        agents=["ann", "bob", "cat", "dan", "eve", "fay", "gus"],
        rows=[
            row(6.0, [4.0, 4.0], agent="dan", rule="fixed", repeats=2),
            row(6.0, [4.5, 4.5], agent="dan", dimension="fluency", rule="fixed", repeats=2),
            row(6.0, [6.0], agent="eve", repeats=2),
            row(6.0, [6.0, 6.0], agent="fay", dimension="fluency", repeats=2),
            row(6.0, [6.0], agent="fay", repeats=2, proposition="p1"),
            row(6.0, [6.0, 6.0], agent="gus", repeats=2),
        ],
        failed={"ann": "r1 failed: boom", "bob": "r2 failed: the judge timed out"},
        without_baseline=["bob", "cat"],
        empty_baseline=["cat", "dan"],
        forced={"dan": ["x"], "eve": ["x"], "gus": ["x"]},
    )
    assert report_verdicts(r) == [
        AgentVerdict("ann", "evaluation failed", "r1 failed: boom", failed=True),
        AgentVerdict("bob", "evaluation failed", "r2 failed: the judge timed out", failed=True),
        AgentVerdict("cat", "no baseline", "not compared: no cat.json in /b"),
        AgentVerdict("dan", "empty baseline", "the baseline holds no scores to compare", failed=True),
        AgentVerdict(
            "eve", "incomplete (forced comparison)", "adherence scored in 1 of 2 repeats", failed=True, compared=True
        ),
        AgentVerdict("fay", "incomplete", "adherence/p1 scored in 1 of 2 repeats", failed=True, compared=True),
        AgentVerdict("gus", "ok (forced comparison)", compared=True),
    ]
    dan = report(agents=["dan"], rows=r.rows[:2] + [row(6.0, [6.0], agent="dan", dimension="x", repeats=2)])
    assert report_verdicts(dan) == [AgentVerdict("dan", "regression", "adherence, fluency", failed=True, compared=True)]
    forced = report(agents=["dan"], rows=r.rows[:1], forced={"dan": ["x"]})
    assert report_verdicts(forced) == [
        AgentVerdict("dan", "regression (forced comparison)", "adherence", failed=True, compared=True)
    ]
    assert report_verdicts(report(agents=["ann"])) == [AgentVerdict("ann", "ok", compared=True)]


def test_the_problems_and_summary_of_a_failing_run():
    r = report(
        agents=["ann", "dan", "eve", "zed"],
        rows=[
            row(6.0, [4.0, 4.5], agent="dan", rule="fixed", repeats=2),
            row(6.0, [], agent="dan", dimension="fluency", repeats=2),
            row(6.0, [6.0], agent="eve", repeats=2),
            row(6.0, [3.0], agent="eve", dimension="fluency", rule="fixed", repeats=2),
            row(6.0, [6.0], agent="eve", dimension="p", repeats=3),
        ],
        failed={"zed": "r9 failed: boom", "ann": "r1 interrupted: no reason recorded"},
        empty_baseline=["dan"],
        forced={"eve": ["x"], "dan": ["y"]},
    )
    assert report_problems(r) == [
        "3 regression(s): dan/adherence -1.75, dan/fluency no score, eve/fluency -3.00",
        "incomplete: eve/adherence scored in 1 of 2 repeats, eve/p scored in 1 of 3 repeats",
        "ann: the evaluation failed: r1 interrupted: no reason recorded",
        "zed: the evaluation failed: r9 failed: boom",
        "dan: the baseline holds no scores to compare",
    ]
    assert report_summary(r) == "Failed: " + "; ".join(report_problems(r)) + " (forced comparison: dan, eve)."


def test_nothing_compared_is_a_failure_naming_why():
    none = report(agents=["ann", "bob"], without_baseline=["ann", "bob"], baselines_dir="baselines")
    assert report_problems(none) == [
        "nothing was compared: no baseline for ann, bob in baselines (record baselines with drift_baseline)"
    ]
    assert report_summary(none) == (
        "Failed: nothing was compared: no baseline for ann, bob in baselines (record baselines with drift_baseline)."
    )
    empty = report(agents=["ann"], empty_baseline=["ann"])
    assert report_problems(empty) == [
        "ann: the baseline holds no scores to compare",
        "nothing was compared: no agent has a baseline with scores (record baselines with drift_baseline)",
    ]
    assert report_problems(report(agents=[])) == []


def test_the_summary_of_a_passing_run():
    assert report_summary(report(agents=["ann"], rows=[row(6.0, [6.5])])) == "No regressions."
    assert report_summary(report(agents=["ann", "bob"], forced={"bob": ["x"], "ann": ["y"]})) == (
        "No regressions (forced comparison: ann, bob)."
    )
    partly = report(agents=["ann", "bob", "cat"], without_baseline=["bob"], forced={"cat": ["x"]})
    assert report_problems(partly) == []
    assert report_summary(partly) == (
        "No regressions among the 2 agent(s) compared (ann, cat); not compared, no baseline: bob"
        " (forced comparison: cat)."
    )


# --- the reports' exact text ------------------------------------------------------------------------------


def a_report(**kw) -> Report:
    """rex regresses on adherence (fixed rule, interval 4.00-4.50 printed), holds on a proposition within the
    noise; ivy has no baseline."""
    low, high = percentile_bootstrap(SPREAD)
    kw.setdefault("forced", {})
    forced = bool(kw["forced"])
    rows = [
        row(6.0, [4.0, 4.5], judged_by="openai/gpt-4o", rule="fixed", repeats=2, forced=forced),
        row(5.0, [5.5, 5.5], dimension="fluency", judged_by="", repeats=2, forced=forced),
        row(high, SPREAD, dimension="consistency", proposition="c1", repeats=12, forced=forced),
        row(None, [7.0, 7.0], agent="ivy", judged_by="offline", repeats=2),
    ]
    return Report(
        mode="live",
        judge="openai/gpt-4o\nsecond line",
        rule="interval",
        repeats=2,
        threshold=1.0,
        rows=rows,
        agents=["rex", "ivy"],
        baselines_dir="baselines",
        without_baseline=["ivy"],
        max_messages=20,
        **kw,
    )


def test_the_markdown_report_word_for_word():
    low, high = percentile_bootstrap(SPREAD)  # 4.063, 6.036; the mean 5.008 is 1.028 below 6.036
    assert markdown(a_report()) == "\n".join(
        [
            "### Persona drift (live)",
            "",
            "Judge: openai/gpt-4o  \nsecond line",
            "",
            "Repeats: 2. A regression is a drop of more than 1.0 whose bootstrap 95% CI over 2 repeats lies below"
            " the baseline. Window: the last 20 messages of each agent.",
            "",
            "| agent | dimension | judged by | baseline | score | 95% CI | delta | |",
            "|---|---|---|---|---|---|---|---|",
            "| rex | adherence | openai/gpt-4o | 6.00 | 4.25 | 4.00–4.50 | -1.75 | regression |",
            "| rex | fluency | - | 5.00 | 5.50 | 5.50–5.50 | +0.50 | ok |",
            "| ivy | adherence | offline | - | 7.00 | 7.00–7.00 | - | no baseline |",
            "",
            "#### Propositions",
            "",
            "| agent | proposition | judged by | baseline | score | 95% CI | delta | |",
            "|---|---|---|---|---|---|---|---|",
            f"| rex | consistency/c1 | - | {high:.2f} | 5.01 | {low:.2f}–{high:.2f} | -1.03 | ok (within the noise) |",
            "",
            "#### Agents",
            "",
            "| agent | verdict | |",
            "|---|---|---|",
            "| rex | regression | adherence |",
            "| ivy | no baseline | not compared: no ivy.json in baselines |",
            "",
            "Failed: 1 regression(s): rex/adherence -1.75.",
            "",
        ]
    )


def test_a_forced_markdown_report_says_so_at_the_top_and_on_every_compared_row():
    text = markdown(a_report(forced={"rex": ["the baseline judged the last 10 messages, this run the last 20"]}))
    lines = text.splitlines()
    assert lines[:8] == [
        "### Persona drift (live) — FORCED COMPARISON",
        "",
        "Judge: openai/gpt-4o  ",
        "second line",
        "",
        "**Forced comparison (--force):** these baselines were captured with another setup and compared anyway;"
        " their deltas are not a like-for-like measure.",
        "",
        "- rex: the baseline judged the last 10 messages, this run the last 20",
    ]
    assert lines[8] == ""
    assert "| 6.00 | 4.25 | 4.00–4.50 | -1.75 | regression (forced comparison) |" in lines[13]
    assert lines[15].endswith("| - | 7.00 | 7.00–7.00 | - | no baseline |")
    assert "| rex | regression (forced comparison) | adherence |" in lines
    assert lines[-1] == "Failed: 1 regression(s): rex/adherence -1.75 (forced comparison: rex)."


def elements(xml: str) -> list[tuple[str, dict[str, str], str | None]]:
    return [(e.tag, dict(e.attrib), e.text) for e in ET.fromstring(xml).iter()]


def test_the_junit_report_element_for_element():
    r = a_report()
    r.rows.append(row(6.0, [6.0], dimension="p", repeats=2))  # incomplete
    r.rows.append(row(None, [], dimension="q"))  # unscored, no baseline
    r.rows.append(row(6.0, [], dimension="z", repeats=2))  # a baseline without a score
    r.agents += ["ann", "cat"]
    r.failed = {"ann": "r1 failed: boom"}
    r.empty_baseline = ["cat"]
    xml = junit(r)
    assert xml.startswith("<?xml version='1.0' encoding='utf-8'?>\n<testsuite ")
    rule = "a drop of more than 1.0 whose bootstrap 95% CI over 2 repeats lies below the baseline"
    low, high = percentile_bootstrap(SPREAD)
    assert elements(xml) == [
        ("testsuite", {"name": "persona-drift", "tests": "9", "failures": "4", "errors": "1", "skipped": "2"}, None),
        ("properties", {}, None),
        ("property", {"name": "mode", "value": "live"}, None),
        ("property", {"name": "judge", "value": "openai/gpt-4o\nsecond line"}, None),
        ("property", {"name": "rule", "value": rule}, None),
        ("testcase", {"classname": "drift.rex", "name": "adherence"}, None),
        ("failure", {"message": "adherence fell 1.75 below its baseline"},
         "baseline 6.0, score 4.25, 95% CI (4.0, 4.5), judged by openai/gpt-4o"),
        ("testcase", {"classname": "drift.rex", "name": "fluency"}, None),
        ("testcase", {"classname": "drift.rex", "name": "consistency/c1"}, None),
        ("testcase", {"classname": "drift.ivy", "name": "adherence"}, None),
        ("skipped", {"message": "no baseline: not compared"}, None),
        ("testcase", {"classname": "drift.rex", "name": "p"}, None),
        ("failure", {"message": "p scored in 1 of 2 repeats"}, None),
        ("testcase", {"classname": "drift.rex", "name": "q"}, None),
        ("skipped", {"message": "no score"}, None),
        ("testcase", {"classname": "drift.rex", "name": "z"}, None),
        ("failure", {"message": "z has no score"}, "baseline 6.0, score None, 95% CI None, judged by "),
        ("testcase", {"classname": "drift.ann", "name": "evaluation"}, None),
        ("error", {"message": "the evaluation failed: r1 failed: boom"}, None),
        ("testcase", {"classname": "drift.cat", "name": "baseline"}, None),
        ("failure", {"message": "the baseline holds no scores to compare"}, None),
    ]  # fmt: skip
    assert (low, high) == (4.063, 6.036)


def test_a_forced_junit_report_and_one_that_compared_nothing():
    forced = a_report(forced={"rex": ["judge differs", "window differs"]})
    got = elements(junit(forced))
    assert got[0][1]["name"] == "persona-drift (forced comparison)"
    assert ("property", {"name": "forced", "value": "rex: judge differs, window differs"}, None) in got
    assert got[6:9] == [
        ("testcase", {"classname": "drift.rex", "name": "adherence [forced comparison]"}, None),
        ("system-out", {}, "forced comparison: judge differs; window differs"),
        ("failure", {"message": "adherence fell 1.75 below its baseline"},
         "baseline 6.0, score 4.25, 95% CI (4.0, 4.5), judged by openai/gpt-4o"),
    ]  # fmt: skip
    assert ("testcase", {"classname": "drift.ivy", "name": "adherence"}, None) in got

    nothing = report(agents=["ivy"], without_baseline=["ivy"], rows=[row(None, [7.0], agent="ivy")])
    assert elements(junit(nothing))[-3:] == [
        ("skipped", {"message": "no baseline: not compared"}, None),
        ("testcase", {"classname": "drift", "name": "comparison"}, None),
        (
            "failure",
            {"message": "nothing was compared: no baseline for ivy in /b (record baselines with drift_baseline)"},
            None,
        ),
    ]
    assert elements(junit(nothing))[0][1] == {
        "name": "persona-drift",
        "tests": "2",
        "failures": "1",
        "errors": "0",
        "skipped": "1",
    }


# --- baseline files ----------------------------------------------------------------------------------------


def test_a_written_baseline_reads_back_with_its_setup(tmp_path):
    folder = tmp_path / "new" / "baselines"  # made with its parents
    path = write_baseline(
        folder,
        agent_id="rex",
        dimensions={"adherence": 6.25},
        proposition_scores={"adherence": {"a1": 7.0}},
        judge=JUDGE,
        mode="live",
        captured_at="2026-01-01T00:00:00",
        sample_size=12,
        rubric={"adherence": "r1"},
        max_messages=20,
        samples={"adherence": [6.0, 6.5]},
    )
    assert path == baseline_file(folder, "rex") == folder / "rex.json"
    assert json.loads(path.read_text()) == {
        "agent": "rex",
        "captured_at": "2026-01-01T00:00:00",
        "judge": {"provider": "openai", "model": "gpt-4o", "prompt": "v3"},
        "rubric": {"adherence": "r1"},
        "max_messages": 20,
        "mode": "live",
        "sample_size": 12,
        "dimensions": {"adherence": 6.25},
        "proposition_scores": {"adherence": {"a1": 7.0}},
        "samples": {"adherence": [6.0, 6.5]},
    }
    assert path.read_text().startswith('{\n  "agent": "rex",') and path.read_text().endswith("}\n")
    assert read_baseline(folder, "rex") == Baseline(
        "rex",
        {"adherence": 6.25},
        {"adherence/a1": 7.0},
        judge=JUDGE,
        mode="live",
        captured_at="2026-01-01T00:00:00",
        samples={"adherence": [6.0, 6.5]},
        path=str(path),
        rubric={"adherence": "r1"},
        max_messages=20,
    )
    single = write_baseline(
        folder, agent_id="ivy", dimensions={}, proposition_scores={}, judge=JUDGE, mode="offline", captured_at="",
        sample_size=1, rubric={}, max_messages=20, samples={"adherence": [6.0]},
    )  # fmt: skip
    assert "samples" not in json.loads(single.read_text())  # one repeat: nothing beyond the mean
    assert read_baseline(folder, "nobody") is None


def test_the_drift_harness_shape_and_older_files_read(tmp_path):
    (tmp_path / "ivy.json").write_text(
        json.dumps(
            {
                "agentId": "ivy",
                "capturedAt": "then",
                "dimensions": {"adherence": {"score": 9}, "fluency": {"mean": 0}},
                "propositionScores": {
                    "consistency": {"c1": 3, "c2": {"score": 2.5}},
                    "p1": 4.5,
                    "p2": {"mean": 5},
                },
                "judge": "anthropic/claude",
            }
        )
    )
    assert read_baseline(tmp_path, "ivy") == Baseline(
        "ivy",
        {"adherence": 9.0, "fluency": 0.0},
        {"consistency/c1": 3.0, "consistency/c2": 2.5, "p1": 4.5, "p2": 5.0},
        judge=JudgeConfig("anthropic", "claude"),
        captured_at="then",
        path=str(tmp_path / "ivy.json"),
    )
    (tmp_path / "old.json").write_text(
        json.dumps({"agent": "old", "created_at": "once", "judge_model": "gpt-4", "dimensions": {}, "mode": "live"})
    )
    old = read_baseline(tmp_path, "old")
    assert (old.judge, old.captured_at, old.mode, old.has_scores) == (JudgeConfig("", "gpt-4"), "once", "live", False)
    (tmp_path / "bare.json").write_text(json.dumps({"proposition_scores": {"p": 1}, "samples": {"a": [1, 2], "b": 3}}))
    bare = read_baseline(tmp_path, "bare")
    assert (bare.judge, bare.proposition_scores, bare.samples, bare.captured_at) == (
        None,
        {"p": 1.0},
        {"a": [1.0, 2.0]},
        "",
    )
    assert bare.has_scores


@pytest.mark.parametrize(
    "doc, message",
    [
        ("{", "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
        ("[]", "(document): must be an object"),
        ({"agentId": "ivy"}, "agentId: 'ivy' does not match the file name (rex)"),
        ({"agent": "ivy"}, "agent: 'ivy' does not match the file name (rex)"),
        ({"dimensions": [6]}, "dimensions: must be an object of scores"),
        ({"dimensions": {"a": 9.5}}, "dimensions.a: 9.5 is not a score from 0 to 9"),
        ({"dimensions": {"a": -0.5}}, "dimensions.a: -0.5 is not a score from 0 to 9"),
        ({"dimensions": {"a": True}}, "dimensions.a: True is not a score from 0 to 9"),
        ({"dimensions": {"a": "6"}}, "dimensions.a: '6' is not a score from 0 to 9"),
        ({"dimensions": {"a": {"score": 6}}, "propositionScores": {"d": {"p": 10}}},
         "propositionScores.d.p: 10 is not a score from 0 to 9"),
        ({"rubric": {"a": ""}}, "rubric: must be an object of dimension: version (a non-empty string)"),
        ({"rubric": {"a": 1}}, "rubric: must be an object of dimension: version (a non-empty string)"),
        ({"rubric": ["a"]}, "rubric: must be an object of dimension: version (a non-empty string)"),
        ({"max_messages": 0}, "max_messages: 0 is not a whole number of 1 or more"),
        ({"max_messages": True}, "max_messages: True is not a whole number of 1 or more"),
        ({"max_messages": "20"}, "max_messages: '20' is not a whole number of 1 or more"),
    ],
)  # fmt: skip
def test_a_wrong_baseline_file_is_refused_naming_the_file_and_field(tmp_path, doc, message):
    path = tmp_path / "rex.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(InvalidInput) as refused:
        read_baseline(tmp_path, "rex")
    assert str(refused.value) == f"{path}: {message}"
    assert [p.file for p in refused.value.problems] == [str(path)]
    assert [p.field for p in refused.value.problems] == [message.split(": ")[0] if doc != "{" else ""]


def test_a_baseline_file_at_the_edges_of_what_is_allowed(tmp_path):
    Path(tmp_path / "rex.json").write_text(json.dumps({"dimensions": {"a": 0, "b": 9}, "max_messages": 1}))
    got = read_baseline(tmp_path, "rex")
    assert (got.dimensions, got.max_messages, got.rubric) == ({"a": 0.0, "b": 9.0}, 1, {})


# --- lists of several: separators and counts ------------------------------------------------------------------


def test_several_of_a_kind_are_listed_with_their_separators():
    two_incomplete = report(agents=["eve"], rows=[row(6.0, [6.0], agent="eve", repeats=2, dimension=d) for d in "ab"])
    assert report_verdicts(two_incomplete)[0].reason == "a scored in 1 of 2 repeats, b scored in 1 of 2 repeats"
    partly = report(agents=["ann", "bob", "cat"], without_baseline=["bob", "cat"])
    assert report_summary(partly) == (
        "No regressions among the 1 agent(s) compared (ann); not compared, no baseline: bob, cat."
    )
    setups = {"rex": SETUP}
    with pytest.raises(ValueError) as refused:
        setup_check({"rex": baseline(judge=None, max_messages=None)}, setups, force=False)
    assert "; rex: the baseline does not record which judge scored it (this run's judge is openai/gpt-4o " in (
        str(refused.value)
    )
    assert "(prompt v3)), the baseline does not record its window (max_messages). Scores from" in str(refused.value)
    dims = ["adherence"]
    assert _proposition_key("adherence/a/1", dims, set()) == ("adherence", "a/1")


def test_the_markdown_report_with_several_forced_reasons_an_ok_agent_and_a_row_without_interval():
    r = report(
        agents=["ann", "rex"],
        rows=[row(6.0, [6.5], agent="ann", repeats=1), row(6.0, [6.0], forced=True)],
        forced={"rex": ["judge differs", "window differs"]},
    )
    lines = markdown(r).splitlines()
    assert "- rex: judge differs; window differs" in lines
    assert "| ann | adherence | - | 6.00 | 6.50 | - | +0.50 | ok |" in lines
    assert "| ann | ok | - |" in lines


def test_junit_counts_every_failure_error_and_skip():
    r = report(
        agents=["ann", "bob", "cat", "dan"],
        rows=[row(None, [], agent="cat", dimension="q"), row(None, [7.0], agent="cat"), row(None, [7.0], agent="dan")],
        failed={"ann": "r1 failed: boom", "bob": "r2 failed: boom"},
        without_baseline=["cat", "dan"],
        forced={"ann": ["judge differs"], "bob": ["window differs"]},
    )
    xml = elements(junit(r))
    assert xml[0][1] == {
        "name": "persona-drift (forced comparison)",
        "tests": "6",
        "failures": "1",
        "errors": "2",
        "skipped": "3",
    }
    assert ("property", {"name": "forced", "value": "ann: judge differs; bob: window differs"}, None) in xml
    empty = report(agents=["ann"], empty_baseline=["ann"])
    assert elements(junit(empty))[0][1]["failures"] == "2"  # the empty baseline, and nothing compared


@pytest.mark.parametrize(
    "judge, config",
    [
        ({}, JudgeConfig("", "", "")),
        ({"provider": "openai"}, JudgeConfig("openai", "", "")),
        ({"model": "gpt-4o"}, JudgeConfig("", "gpt-4o", "")),
        ({"prompt": "v3"}, JudgeConfig("", "", "v3")),
        ("", None),
        ("openai/gpt-4o", JudgeConfig("openai", "gpt-4o", "")),
    ],
)
def test_a_judge_part_a_baseline_leaves_out_reads_as_unrecorded(tmp_path, judge, config):
    (tmp_path / "rex.json").write_text(json.dumps({"judge": judge, "dimensions": {"a": 5}}))
    assert read_baseline(tmp_path, "rex").judge == config
