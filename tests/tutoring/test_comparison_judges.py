"""A group's comparison files (comparison.json, comparison.md) never average runs of different judges: a
row per persona and judge, keyed so a reader can tell them apart; a group of one judge keeps its shape."""

import json
import math
import statistics
from pathlib import Path

import pytest
from scipy import stats

from evaluation.models import EvaluationRun, Persona, Topic
from evaluation.tutoring.pipeline import finalize_group
from tests.web.test_comparison import LENIENT, STRICT, make_group  # the judged runs the page's test makes

pytestmark = pytest.mark.django_db


def written(group):
    folder = finalize_group(group)
    assert folder is not None, f"no comparison written for {group}"
    return json.loads((Path(folder) / "comparison.json").read_text()), (Path(folder) / "comparison.md").read_text()


def t_interval(values):
    """The 95% t interval of the mean, written out: mean +- t(0.975, n-1) * s / sqrt(n), to 2 places, clipped
    to the scale's 0-10 as comparison.md and comparison.json both say (a score cannot lie outside it)."""
    mean, half = statistics.fmean(values), stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values)
    half /= math.sqrt(len(values))
    return max(0.0, round(mean - half, 2)), min(10.0, round(mean + half, 2))


def test_two_judges_in_one_group_get_a_row_each(catalog, settings, tmp_path):
    settings.EVALUATION = {**settings.EVALUATION, "RUNS_DIR": tmp_path}
    strict, lenient = (2.0, 3.0, 4.0), (8.0, 9.0, 10.0)
    make_group(
        "two_judges",
        [("ace", STRICT, s) for s in strict] + [("ace", LENIENT, s) for s in lenient] + [("struggler", STRICT, 6.0)],
    )
    data, md = written("two_judges")

    assert data["split_by_judge"] is True and data["judges"] == [LENIENT, STRICT]
    # a persona's rows together, its judges in name order; keyed "<persona> · <judge>", each naming both
    assert list(data["personas"]) == [f"ace · {LENIENT}", f"ace · {STRICT}", f"struggler · {STRICT}"]
    row = data["personas"][f"ace · {STRICT}"]
    assert (row["persona_id"], row["judge"]) == ("ace", STRICT)
    assert row["mean_scores"] == {"pacing": 3.0} and row["n"] == {"pacing": 3}
    assert tuple(row["ci"]["pacing"]) == t_interval(strict) == (0.52, 5.48)
    assert [r["run_id"] for r in row["runs"]] == ["two_judges_0", "two_judges_1", "two_judges_2"]
    row = data["personas"][f"ace · {LENIENT}"]
    assert row["mean_scores"] == {"pacing": 9.0} and tuple(row["ci"]["pacing"]) == t_interval(lenient)
    assert data["personas"][f"struggler · {STRICT}"]["mean_scores"] == {"pacing": 6.0}
    assert data["run_count"] == 7

    # the Markdown: a judge column, each judge's own mean (never the 6.0 of ace's six runs), the note
    assert "| persona | judge | pacing | average |" in md
    assert "|---|---|---|---|" in md
    assert f"| Arjun | {STRICT} | 3 [0.52, 5.48] n=3 | 3 [0.52, 5.48] n=3 |" in md
    assert f"| Arjun | {LENIENT} | 9 [6.52, 10] n=3 | 9 [6.52, 10] n=3 |" in md
    assert f"| Priya | {STRICT} | 6 n=1 | 6 n=1 |" in md
    assert "| Arjun | 6" not in md and "| Arjun | " + STRICT + " | 6" not in md
    assert f"Scored by 2 judges ({LENIENT}, {STRICT})" in md and "not averaged" in md
    assert f"### Arjun · {STRICT}" in md and f"### Arjun · {LENIENT}" in md


def test_a_group_of_one_judge_keeps_personas_keyed_by_id(catalog, settings, tmp_path):
    settings.EVALUATION = {**settings.EVALUATION, "RUNS_DIR": tmp_path}
    make_group("one_judge", [("ace", STRICT, 2.0), ("ace", STRICT, 4.0), ("struggler", STRICT, 6.0)])
    data, md = written("one_judge")
    assert list(data["personas"]) == ["ace", "struggler"]
    assert "judges" not in data and "split_by_judge" not in data
    assert "judge" not in data["personas"]["ace"] and data["personas"]["ace"]["mean_scores"] == {"pacing": 3.0}
    assert "| persona | pacing | average |" in md and "| persona | judge |" not in md
    assert "| Arjun | 3 n=2 | 3 n=2 |" in md and "### Arjun" in md and "Scored by" not in md
    assert f"Judged by {STRICT}." in md  # one judge, named (comparison.md calls personas by their names)


def test_a_run_never_judged_gets_its_own_row_beside_two_judges(catalog, settings, tmp_path):
    settings.EVALUATION = {**settings.EVALUATION, "RUNS_DIR": tmp_path}
    make_group("with_failure", [("ace", STRICT, 4.0), ("ace", LENIENT, 8.0)])
    EvaluationRun.objects.create(
        run_id="with_failure_x",
        persona=Persona.objects.get(persona_id="ace"),
        topic=Topic.objects.filter(approved=True).first(),
        status="failed",
        stage="failed",
        group="with_failure",
        repeat_index=9,
    )
    data, md = written("with_failure")
    assert list(data["personas"]) == [f"ace · {LENIENT}", f"ace · {STRICT}", "ace · not judged"]
    assert data["personas"]["ace · not judged"]["judge"] == "" and data["personas"]["ace · not judged"]["runs"]
    assert "| Arjun | not judged | - | failed |" in md
    assert f"| Arjun | {STRICT} | 4 n=1 | 4 n=1 |" in md
