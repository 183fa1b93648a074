"""Regression rules without a database: per-persona diagnostics with t intervals, gates decided by the family of
dimension tests (pass, regression, inconclusive), gates that leave out what does not count, baselines that do
not compare."""

import statistics

import pytest
from scipy import stats

from evaluation.tutoring.regression import (
    INCONCLUSIVE,
    NOT_COMPARED,
    PASS,
    REGRESSION,
    baseline_means,
    compare,
    counted,
    gate,
    mean_ci,
    mismatches,
    verdict,
)

TOPIC = "two-digit-addition-regrouping"


def test_the_mean_interval_is_students_t():
    # mean 5, sd 0.4, n 3: 5 ± t(0.975, 2) * 0.4 / sqrt(3) = 5 ± 4.3027 * 0.23094 = [4.0063, 5.9937]
    assert mean_ci([5.0, 5.4, 4.6]) == (4.01, 5.99)
    assert mean_ci([6.0]) == (None, None)
    # two runs that score the same are no evidence of zero spread: the spread is floored at the rounding of the
    # judge's whole points, sd sqrt(1/12): 6 ± 12.706 * 0.288675 / sqrt(2) = 6 ± 2.5937
    assert mean_ci([6.0, 6.0]) == (3.41, 8.59)
    # and an interval never leaves the score's range: n=2 on 0 and 10 made [-22.41, 28.41]
    assert mean_ci([3.0, 6.0]) == (0.0, 10.0) and mean_ci([9.0, 10.0]) == (3.15, 10.0)
    # an independent computation: the t quantile from its distribution function, not the interval helper
    values = [3.0, 8.0, 7.0, 6.5]
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    quantile = next(q / 10000 for q in range(10000, 100000) if stats.t.cdf(q / 10000, 3) >= 0.975)
    half = quantile * sd / len(values) ** 0.5
    low, high = mean_ci(values)
    assert abs(low - (mean - half)) <= 0.011 and abs(high - (mean + half)) <= 0.011


def runs_of(persona, averages, **extra):
    return [
        {"run_id": f"{persona}_{i}", "persona_id": persona, "scores": {"pacing": a}, "avg_score": a, **extra}
        for i, a in enumerate(averages)
    ]


def test_a_drop_is_a_regression_only_beyond_the_threshold_and_outside_the_interval():
    runs = runs_of("steady", [5.0, 5.2, 4.8]) + runs_of("noisy", [3.0, 8.0, 7.0]) + runs_of("close", [6.6, 6.5, 6.7])
    baseline = {"steady": {"average": 7.0}, "noisy": {"average": 7.5}, "close": {"average": 7.0}}
    verdicts = {v.persona_id: v for v in compare(runs, baseline)}
    assert verdicts["steady"].flagged and verdicts["steady"].drop == 2.0
    assert "excludes 7" in verdicts["steady"].why
    # a drop of 1.5, but three runs this far apart cannot tell it from noise
    assert not verdicts["noisy"].flagged and "holds 7.5: noise" in verdicts["noisy"].why
    assert not verdicts["close"].flagged and "within the threshold" in verdicts["close"].why
    # the fixed rule flags the noisy drop too
    fixed = {v.persona_id: v.flagged for v in compare(runs, baseline, rule="fixed")}
    assert fixed == {"steady": True, "noisy": True, "close": False}
    # exactly at the threshold is not beyond it
    at = compare(runs_of("edge", [6.0, 6.0]), {"edge": {"average": 7.0}}, rule="fixed")
    assert [v.flagged for v in at] == [False]


def test_one_run_of_a_persona_is_flagged_by_the_threshold_alone_and_says_so():
    baseline = {"solo": {"average": 8.0, "pacing": 8.0}, "fine": {"average": 7.0}}
    verdicts = {
        (v.persona_id, v.dimension): v for v in compare(runs_of("solo", [1.0]) + runs_of("fine", [6.5]), baseline)
    }
    drop = verdicts[("solo", "average")]
    assert drop.flagged and drop.n == 1 and (drop.low, drop.high) == (None, None)
    assert "one run of this persona: no interval" in drop.why
    assert verdicts[("solo", "pacing")].flagged
    within = verdicts[("fine", "average")]
    assert not within.flagged and within.why == "drop 0.5 is within the threshold 1"


def baseline_of(means, runs=None, **extra):
    """A recorded baseline: its means per persona, and its runs (two per persona around each mean unless given)."""
    if runs is None:
        runs = [
            {"persona_id": p, "topic": TOPIC, "seed": 100 + i, "scores": {"pacing": dims["average"] + d}}
            for p, dims in means.items()
            for i, d in enumerate((-0.5, 0.5))
            if "average" in dims
        ]
    return {"id": "base", "means": means, "rule": "noise-aware", "threshold": 1.0, "runs": runs, **extra}


def test_the_gate_leaves_out_failed_and_cut_short_runs_and_counts_them():
    runs = (
        runs_of("ace", [5.0], turns_answered=18, max_turns=100, coverage=0.18)
        + runs_of("quiet", [7.0], turns_answered=80, max_turns=100, coverage=0.8)
        + [{"run_id": "dead", "persona_id": "ace", "scores": {}, "avg_score": None, "status": "failed"}]
    )
    checked = gate(runs, baseline_of({"ace": {"average": 9.0}, "quiet": {"average": 7.0}}), min_coverage=0.8)
    # the cut-short ace run would be a regression, but it measured 18 of 100 turns: left out, and said so; with
    # no run of ace left, ace was not measured, so the batch does not pass however well quiet did
    assert checked.outcome == NOT_COMPARED and [v.persona_id for v in checked.verdicts] == ["quiet"]
    assert checked.left_out == (
        "ace_0: judged on 18/100 turns, below the coverage threshold 80%",
        "dead: failed, no scores",
    )
    assert checked.reason == (
        "not measured: ace (no run counts: failed or cut short); no regression in 1 dimension(s) of the other "
        "1 persona(s); 2 run(s) left out"
    )
    # one whole run of ace beside them: ace is measured, the others are left out and counted; one run per
    # persona against two cannot see a drop of 1 here, and says so
    whole = runs_of("ace", [8.5], coverage=1.0)
    seen = gate(runs + whole, baseline_of({"ace": {"average": 9.0}, "quiet": {"average": 7.0}}), min_coverage=0.8)
    assert seen.outcome == INCONCLUSIVE and seen.reason.startswith("k=1 detects only drops >= ")
    assert seen.reason.endswith("; 2 run(s) left out")
    # with a threshold below its coverage the same run counts, and pacing's batch mean dropped by 2
    lower = gate(runs, baseline_of({"ace": {"average": 9.0}, "quiet": {"average": 7.0}}), min_coverage=0.1)
    assert lower.outcome == REGRESSION and [t.dimension for t in lower.regressions] == ["pacing"]
    assert lower.regressions[0].delta == -2.0


def test_a_gate_that_compares_nothing_is_not_a_pass():
    base = baseline_of({"ace": {"average": 9.0}})
    failed = [{"run_id": "r1", "persona_id": "ace", "scores": {}, "avg_score": None, "status": "failed"}]
    checked = gate(failed, base, min_coverage=0.8)
    assert checked.outcome == NOT_COMPARED and "no run of the batch counts: 1 of 1 left out" in checked.reason
    other = gate(runs_of("quiet", [7.0]), base, min_coverage=0.8)
    assert other.outcome == NOT_COMPARED and "no persona in common" in other.reason
    assert other.no_baseline == ("quiet",)
    assert gate([], base, min_coverage=0.8).outcome == NOT_COMPARED


OURS = {"judge": "openai/gpt-5", "prompt_hash": "abc", "rubric": "tutoring-judge v1"}


def recorded(**changes):
    entry = {"persona_id": "ace", "topic": TOPIC, "max_turns": 4, "judge_config": {**OURS}}
    entry["judge_config"].update({k: v for k, v in changes.items() if k in OURS})
    entry.update({k: v for k, v in changes.items() if k not in OURS})
    return [entry]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"judge": "openai/gpt-5-mini"}, "judge: the baseline has openai/gpt-5-mini, this batch openai/gpt-5"),
        ({"prompt_hash": "old"}, "judge prompt: the baseline has old, this batch abc"),
        ({"rubric": "tutoring-judge v0"}, "rubric: the baseline has tutoring-judge v0, this batch tutoring-judge v1"),
        ({"topic": "fractions"}, f"topic: the baseline has fractions, this batch {TOPIC}"),
        ({"max_turns": 20}, "max turns: the baseline has 20, this batch 4"),
        ({"persona_id": "quiet_one"}, "personas: the baseline has no runs of ace"),
        ({"judge_config": None}, "judge: the baseline has not recorded, this batch openai/gpt-5"),
    ],
)
def test_a_baseline_that_differs_in_one_respect_is_named(changes, message):
    found = mismatches(recorded(**changes), judge_config=OURS, topic=TOPIC, personas=["ace"], max_turns=4)
    assert message in found and len(found) == (3 if changes == {"judge_config": None} else 1)
    assert mismatches(recorded(), judge_config=OURS, topic=TOPIC, personas=["ace"], max_turns=4) == []


def test_a_verdict_carries_its_figures_rounded_to_two_places():
    v = verdict("ace", "pacing", 7.0, [6.123, 6.124, 6.125])
    assert v.as_dict() == {
        "persona_id": "ace",
        "dimension": "pacing",
        "baseline": 7.0,
        "mean": 6.12,
        "n": 3,
        "low": 5.41,
        "high": 6.84,
        "drop": 0.88,
        "flagged": False,
        "why": "drop 0.88 is within the threshold 1",
    }
    assert mean_ci([6.123, 6.123]) == (3.53, 8.72)
    # the default rule is the noise-aware one, which says when one run leaves it to the fixed rule
    assert verdict("ace", "pacing", 7.0, [6.5]).why == "drop 0.5 is within the threshold 1"
    assert verdict("ace", "pacing", 9.0, [6.5]).why == (
        "drop 2.5 exceeds the threshold 1 (one run of this persona: no interval)"
    )


def test_an_interval_that_reaches_the_baseline_holds_it():
    # mean 4, sd 0.4, n 3: the interval's top is 4 + 4.3027 * 0.23094 = 4.9937, shown as 4.99
    v = verdict("ace", "pacing", 4.99, [4.0, 4.4, 3.6], threshold=0.4)
    assert (v.high, v.flagged) == (4.99, False) and "holds 4.99: noise" in v.why


def test_compare_passes_the_threshold_on_and_names_real_sessions_session():
    runs = [{"persona_id": None, "scores": {"pacing": 5.0}, "avg_score": 5.0}]
    (v,) = compare(runs, {"session": {"pacing": 7.0}}, rule="fixed")
    assert (v.persona_id, v.flagged) == ("session", True)
    (v,) = compare(runs, {"session": {"pacing": 7.0}}, rule="fixed", threshold=3.0)
    assert not v.flagged and v.why == "drop 2 is within the threshold 3"


def test_baseline_means_per_persona_and_dimension_from_scored_runs_only():
    runs = [
        {"persona_id": "ace", "scores": {"pacing": 6.0, "authenticity": 9.0}, "avg_score": 7.0},
        {"persona_id": "ace", "scores": {"pacing": 7.125}, "avg_score": 8.125},
        {"persona_id": "ace", "scores": {}, "avg_score": None},
        {"persona_id": None, "scores": {"pacing": 3.0}, "avg_score": None},
    ]
    assert baseline_means(runs) == {
        "ace": {"pacing": 6.56, "authenticity": 9.0, "average": 7.56},
        "session": {"pacing": 3.0},
    }


def test_a_gate_as_stored_names_everything_it_decided():
    runs = runs_of("ace", [5.0], coverage=1.0)
    base = baseline_of({"ace": {"average": 9.0}}, forced=True, mismatches=["topic: the baseline has x, this batch y"])
    stored = gate(runs, base, min_coverage=0.8).as_dict()
    assert {k: v for k, v in stored.items() if k not in ("verdicts", "tests", "plan", "reason", "family_rule")} == {
        "baseline": "base",
        "outcome": "inconclusive",
        "rule": "noise-aware",
        "threshold": 1.0,
        "alpha": 0.05,
        "power": 0.8,
        "pairing": "unpaired: each persona's own run-to-run spread, Welch-Satterthwaite degrees of freedom",
        "forced": True,
        "mismatches": ["topic: the baseline has x, this batch y"],
        "left_out": [],
        "no_baseline": [],
        "min_coverage": 0.8,
    }
    # one persona, one run, one degree of freedom: a drop of 4 is not significant, and a drop of 1 unseeable
    assert stored["reason"].startswith("k=1 detects only drops >= ") and " on pacing; " in stored["reason"]
    assert [(t["dimension"], t["delta"], t["df"], t["regression"]) for t in stored["tests"]] == [
        ("pacing", -4.0, 1, False)
    ]
    assert stored["plan"]["df"] == {"pacing": 1} and "Holm over 1 dimensions" in stored["family_rule"]
    assert [v["dimension"] for v in stored["verdicts"]] == ["average"]
    # a run that recorded no coverage (a stored session) counts as whole, and no more than whole
    assert counted({"scores": {"pacing": 5.0}}, 1.0) and not counted({"scores": {"pacing": 5.0}}, 1.01)


def test_every_value_a_baseline_disagrees_on_is_listed():
    runs = recorded() + recorded(judge="openai/gpt-4o", topic="fractions", max_turns=9)
    found = mismatches(runs, judge_config=OURS, topic=TOPIC, personas=["ace", "bo", "cy"], max_turns=4)
    assert found == [
        "judge: the baseline has openai/gpt-4o, openai/gpt-5, this batch openai/gpt-5",
        f"topic: the baseline has fractions, {TOPIC}, this batch {TOPIC}",
        "max turns: the baseline has 4, 9, this batch 4",
        "personas: the baseline has no runs of bo, cy",
    ]


def test_a_drop_is_rounded_like_the_figures_it_compares():
    # 7.005 - 6 is 1.00499... in binary: shown and judged as 1, within the threshold
    v = verdict("ace", "pacing", 7.005, [6.0], rule="fixed")
    assert (v.drop, v.flagged) == (1.0, False)


def test_a_gate_applies_the_baselines_rule_and_threshold_and_words_its_reason():
    noisy = runs_of("ace", [3.0, 8.0, 7.0]) + runs_of("bo", [6.0, 6.0])
    means = {"ace": {"average": 7.5}, "bo": {"average": 9.0}}
    # the fixed rule: the batch mean of pacing dropped by ((6 - 7.5) + (6 - 9)) / 2 = 2.25
    fixed = gate(noisy, baseline_of(means, rule="fixed"), min_coverage=0.8)
    assert fixed.outcome == REGRESSION and fixed.reason == (
        "1 dimension(s) dropped: pacing batch mean dropped 2.25 (beyond 1, fixed rule)"
    )
    assert gate(noisy, baseline_of(means, rule="fixed", threshold=3.0), min_coverage=0.8).outcome == PASS
    # noise-aware: ace's spread (sd 2.6) makes the drop not significant, and a drop of 1 unseeable
    loose = gate(noisy, baseline_of(means, threshold=1.0), min_coverage=0.8)
    assert loose.outcome == INCONCLUSIVE and loose.reason.startswith("k=2 detects only drops >= ")
    # a persona the baseline lacks: never a pass, whatever else was seen
    extra = gate(noisy + runs_of("cy", [5.0]), baseline_of(means, threshold=9.0, rule="fixed"), min_coverage=0.8)
    assert extra.outcome == INCONCLUSIVE and extra.no_baseline == ("cy",)
    assert extra.reason == (
        "the baseline covers 2 of the batch's 3 personas (none for cy): a partial comparison is never a pass"
    )
    dead = {"run_id": "r9", "persona_id": "ace", "scores": {}, "avg_score": None}
    assert gate([*noisy, dead], baseline_of(means, threshold=9.0, rule="fixed"), min_coverage=0.8).reason == (
        "no dimension dropped in 1 dimension(s) of 2 persona(s); 1 run(s) left out"
    )
    assert gate([dead], baseline_of(means), min_coverage=0.8).left_out == ("r9: not scored, no scores",)
    assert gate([], baseline_of(means), min_coverage=0.8).reason == "the batch has no runs"
    sessions = [{"run_id": "s", "persona_id": None, "scores": {"pacing": 5.0}, "avg_score": 5.0}]
    other = gate(sessions + runs_of("dee", [5.0]), baseline_of(means), min_coverage=0.8)
    assert other.reason == "no persona in common with the baseline (the batch has dee, session)"
    # a baseline record without its runs (and none stored any more): nothing to test against, not a pass
    bare = gate(noisy, baseline_of(means, runs=[]), min_coverage=0.8)
    assert bare.outcome == NOT_COMPARED and "no scores of base to test against" in bare.reason


def test_a_clear_drop_on_enough_runs_is_a_regression_and_no_change_a_pass():
    means = {p: {"average": 6.0} for p in ("ace", "bo", "cy", "dee")}
    base_runs = [
        {"persona_id": p, "topic": TOPIC, "seed": i, "scores": {"pacing": v}}
        for p in means
        for i, v in enumerate((5.0, 6.0, 7.0, 6.0))
    ]
    same = [r for p in means for r in runs_of(p, [5.0, 6.0, 7.0, 6.0])]
    passed = gate(same, baseline_of(means, runs=base_runs), min_coverage=0.8)
    assert passed.outcome == PASS and passed.reason == (
        "no dimension dropped in 1 dimension(s) of 4 persona(s) (each would have seen a drop of 1 with 80% power)"
    )
    worse = [r for p in means for r in runs_of(p, [3.0, 4.0, 5.0, 4.0])]
    dropped = gate(worse, baseline_of(means, runs=base_runs), min_coverage=0.8)
    assert dropped.outcome == REGRESSION and dropped.reason.startswith(
        "1 dimension(s) dropped: pacing batch mean dropped 2.00 (interval ["
    )
    assert "significant after Holm" in dropped.reason and not dropped.tests[0].paired


def test_an_unknown_rule_is_refused_not_read_as_another():
    with pytest.raises(ValueError, match="rule: 'vibes' is not one of noise-aware, fixed"):
        verdict("ace", "pacing", 7.0, [6.0], rule="vibes")
    with pytest.raises(ValueError, match="rule: 'vibes'"):
        compare(runs_of("ace", [6.0]), {"ace": {"average": 7.0}}, rule="vibes")
    # called without a rule, both apply the noise-aware one (which one run leaves to the fixed rule)
    assert compare(runs_of("ace", [5.0]), {"ace": {"average": 7.0}})[0].flagged
    assert verdict("ace", "pacing", 7.5, [3.0, 8.0, 7.0]).why.endswith("holds 7.5: noise")


def test_the_judges_rubric_is_pinned_to_its_version():
    """Edit a dimension, question, anchor or level text of tutoring/rubric.py and this fails: raise VERSION there
    (baselines judged under the old rubric then stop comparing) and pin the new content here."""
    import dataclasses
    import hashlib
    import json

    from evaluation.tutoring.judge import judge_config
    from evaluation.tutoring.rubric import ANCHORS, RUBRIC, SLUG, VERSION

    content = json.dumps([dataclasses.asdict(d) for d in RUBRIC] + [list(ANCHORS)], sort_keys=True)
    pinned = {1: "531d3828f52009aa"}
    assert (SLUG, hashlib.sha256(content.encode()).hexdigest()[:16]) == ("tutoring-judge", pinned[VERSION])
    assert judge_config("offline/offline-rules-v1")["rubric"] == "tutoring-judge v1"


def test_every_persona_not_measured_is_named_and_the_others_counted_without_the_unbaselined():
    dead = [
        {"run_id": f"r{p}", "persona_id": p, "scores": {}, "avg_score": None, "status": "failed"} for p in ("bo", "cy")
    ]
    runs = runs_of("ace", [9.0]) + runs_of("dee", [5.0]) + dead
    checked = gate(runs, baseline_of({"ace": {"average": 9.0}}, forced=True), min_coverage=0.8)
    assert checked.outcome == NOT_COMPARED and checked.no_baseline == ("dee",)
    assert checked.reason == (
        "not measured: bo, cy (no run counts: failed or cut short); no regression in 1 dimension(s) of the other "
        "1 persona(s); 2 run(s) left out"
    )
