"""What the corrected estimates say where a normal interval would mislead: a share whose labelled values are all
equal (the Wilson score interval, never one of no width), a mean whose labelled values are all equal (no
interval, a reason), few labels; then --compare's refusals and the labelling budget in the JSON and the API."""

import json
import math
import re

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from scipy.stats import binomtest

from evaluation.judging import estimates, selectors, services
from evaluation.models import Annotation, JudgeConfiguration
from tests.judging.synthetic import candidate_sets

Z = 1.959963984540054


def marks(line: str) -> list[set[int]]:
    """The note numbers after each figure of a printed row (^1,3), in the row's order."""
    return [{int(k) for k in found.split(",")} for found in re.findall(r"\^([\d,]+)", line)]


def wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    """Wilson (1927): the p whose score test at 95% does not reject, written out."""
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = (Z / (1 + Z * Z / n)) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize(("k", "n"), [(0, 60), (60, 60), (3, 10), (1, 2), (17, 40)])
def test_the_wilson_interval_is_the_formula_and_scipys(k, n):
    ours = estimates.wilson(k, n)
    assert ours == pytest.approx(wilson_by_hand(k, n), abs=1e-12)
    theirs = binomtest(k, n).proportion_ci(method="wilson")
    assert ours == pytest.approx((theirs.low, theirs.high), abs=1e-9)


def test_a_share_no_labelled_item_carries_gets_the_wilson_interval_not_one_of_no_width():
    # 120 judged items, the judge says "Yes" (place 2 of 3) on 2; people label 60 items and none of them "Yes"
    judged = {i: (2 if i in (70, 90) else i % 2) for i in range(120)}
    people = {i: i % 2 for i in range(60)}
    rows = {r.estimand: r for r in estimates.dimension_estimates("d", ("No", "Maybe", "Yes"), False, judged, people)}
    yes = rows["share:Yes"]
    low, high = wilson_by_hand(0, 60)
    assert (low, high) == (0.0, pytest.approx(Z * Z / (60 + Z * Z)))
    for found in (yes.people_only, yes.corrected):
        assert found.value == 0.0 and (found.low, found.high) == pytest.approx((low, high), abs=1e-12)
        assert found.method.endswith("every value is 0: Wilson score interval of 0 of 60")
        assert str(found) != "0.000 [0.000, 0.000]" and found.width > 0.05
        assert estimates.FEW_LABELS_NOTE not in found.method
    assert yes.corrected.lam == 0.0 and "lambda 0, so the people-only estimate" in yes.corrected.method
    assert yes.corrected.method.startswith(estimates.PPI_PLUS_PLUS)
    # the judge's share (2 of 120) keeps its normal interval, clipped at 0
    assert yes.judge_only.value == pytest.approx(2 / 120) and "Wilson" not in yes.judge_only.method
    # the other shares vary among the labels: normal intervals, no Wilson
    assert all("Wilson" not in r.corrected.method for k, r in rows.items() if k != "share:Yes")
    # a difference cannot add a Wilson interval's variance: no interval, with the reason
    gap = estimates.difference(yes.corrected, rows["share:No"].corrected)
    assert gap.value is None and "Wilson" in gap.reason


def test_a_mean_whose_labelled_values_are_all_equal_has_no_interval_and_says_why():
    scale = ("1", "2", "3")
    judged = {i: i % 3 for i in range(90)}
    people = {i: 1 for i in range(40)}  # every labelled item "2"
    (row,) = estimates.dimension_estimates("score", scale, True, judged, people)
    for found in (row.people_only, row.corrected):
        assert found.value == 2.0 and (found.low, found.high, found.se) == (None, None, None)
        assert found.reason == "every labelled value is the same: label more items"
        assert (
            found.width is None
            and str(found) == "2.000 (no interval: every labelled value is the same: label more items)"
        )
    assert row.judge_only.low < row.judge_only.high
    # and a judge that gives every item the same value: no judge-only interval either
    flat = estimates.dimension_estimates("score", scale, True, dict.fromkeys(range(50), 2), {0: 2, 1: 0})[0]
    assert flat.judge_only.value == 3.0 and flat.judge_only.low is None
    assert flat.judge_only.reason == "every judged value is the same: the judge told no item apart"


def test_fewer_than_thirty_labels_say_the_normal_interval_may_be_too_narrow():
    judged = {i: i % 3 for i in range(200)}
    for labelled, few in ((29, True), (30, False), (2, True)):
        people = {i: (i + i // 4) % 3 for i in range(labelled)}
        (row,) = estimates.dimension_estimates("score", ("1", "2", "3"), True, judged, people)
        for found in (row.people_only, row.corrected):
            assert found.low is not None
            assert (found.method.endswith("; few labels (n<30): the normal interval may be too narrow")) is few
            assert (estimates.FEW_LABELS_NOTE in found.notes) is few
        assert estimates.FEW_LABELS_NOTE not in row.judge_only.method
    # one label: not enough data, no note
    (one,) = estimates.dimension_estimates("score", ("1", "2", "3"), True, judged, {0: 1})
    assert one.people_only.value is None and one.people_only.method == estimates.CLASSICAL


# --- the doors ----------------------------------------------------------------------------------------


@pytest.fixture
def judged(db):
    services.transcripts_import(json.dumps(candidate_sets(15, 8, seed=4)), file="synthetic.json")
    report = services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=1, workers=1)
    assert report.judged == 15 * 8 and not report.failed
    return JudgeConfiguration.objects.get()


def test_the_command_prints_a_wilson_interval_with_a_mark_and_its_footnote(judged, capsys):
    # nobody labels any answer "Yes" (place 2) on Mistake_Identification
    Annotation.objects.filter(dimension__name="Mistake_Identification", score=2).update(score=1)
    call_command("estimate", "--rubric", "tutor-response", "--labelled", "60", "--seed", "3")
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("Mistake_Identification") and "share:Yes" in x)
    assert "0.000 [0.000, 0.000]" not in line
    high = wilson_by_hand(0, 60)[1]
    # the people's share gets Wilson's interval; the corrected one, stratified by the judge's level, has a width
    # of its own (each level's spread counted with one 0 and one 1 added), clipped at 0
    assert line.count(f"0.000 [0.000, {high:.3f}]") == 1 and "n=60" in line
    corrected = re.findall(r"(\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]", line)[2]
    assert corrected[:2] == ("0.000", "0.000") and float(corrected[2]) > 0
    footnotes = [x for x in out.splitlines() if x.startswith("^")]
    wilson = next(x for x in footnotes if x.endswith("every value is 0: Wilson score interval of 0 of 60"))
    mark = int(wilson.split()[0][1:])
    assert [mark in cell for cell in marks(line)] == [False, True, False]  # judge only (1 of 120 "Yes"), people
    assert len(footnotes) == len(set(footnotes))  # each note once
    # the JSON says the same; the API gives the method
    call_command("estimate", "--rubric", "tutor-response", "--labelled", "60", "--seed", "3", "--json")
    first = json.loads(capsys.readouterr().out)["dimensions"][0]
    assert first["people_only"]["high"] == pytest.approx(high) and first["people_only"]["low"] == 0.0


def test_the_command_says_few_labels(judged, capsys):
    call_command("estimate", "--rubric", "tutor-response", "--labelled", "20")
    out = capsys.readouterr().out
    note = next(x for x in out.splitlines() if x.endswith(estimates.FEW_LABELS_NOTE))
    mark = int(note.split()[0][1:])
    line = next(x for x in out.splitlines() if x.startswith("Tutor_Tone") and "share:Encouraging" in x)
    assert [mark in cell for cell in marks(line)] == [False, True, True]  # people only and corrected, not the judge


def test_the_command_refuses_compare_with_an_empty_group_or_a_selection_beside_it(judged):
    compare = ("estimate", "--rubric", "tutor-response", "--compare", "Sonnet")
    with pytest.raises(CommandError, match="--compare: candidate 'Nobody' has no items judged under"):
        call_command(*compare, "Nobody", "--by", "candidate")
    for option in ("--source", "--candidate", "--group"):
        with pytest.raises(CommandError, match=f"{option}: cannot be combined with compare"):
            call_command(*compare, "GPT4", "--by", "candidate", option, "x")
    with pytest.raises(CommandError, match="--budget: cannot be combined with compare"):
        call_command(*compare, "GPT4", "--by", "candidate", "--budget")


def test_the_budget_is_in_the_json_and_the_api(judged, capsys, client, django_user_model):
    call_command("estimate", "--rubric", "tutor-response", "--labelled", "40", "--seed", "2", "--budget", "--json")
    body = json.loads(capsys.readouterr().out)
    table = selectors.estimate_table("tutor-response", labelled=40, seed=2)
    budgets = selectors.estimate_budget(table, seed=2)
    assert body["budget"] == json.loads(json.dumps([b.as_dict() for b in budgets]))
    first, widest = body["budget"][0], budgets[0]
    assert (first["dimension"], first["estimand"]) == (widest.dimension, widest.estimand)
    assert set(first["points"][0]) == {"labelled", "corrected", "corrected_low", "corrected_high", "people_only"}
    assert [p["labelled"] for p in first["points"]] == [10, 20, 40]
    assert first["points"][-1]["corrected"] == pytest.approx(
        next(r for r in table.rows if (r.dimension, r.estimand) == (widest.dimension, widest.estimand)).corrected.width
    )
    assert first["label_next"] == list(widest.next_items) and len(first["label_next"]) == 10
    call_command("estimate", "--rubric", "tutor-response", "--json")
    assert "budget" not in json.loads(capsys.readouterr().out)

    user = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="viewer"))
    token = Token.objects.create(user=user)

    def api(query):
        return client.get(
            f"/api/judging/estimates?rubric=tutor-response&{query}", HTTP_AUTHORIZATION=f"Token {token.key}"
        )

    answer = api("labelled=40&seed=2&budget=true")
    assert answer.status_code == 200, answer.content
    assert answer.json()["budget"] == body["budget"]
    assert "budget" not in api("labelled=40&seed=2").json()
    refused = api("compare=Sonnet,GPT4&by=candidate&budget=true")
    assert refused.status_code == 400 and "cannot be combined" in json.dumps(refused.json()["fields"]["budget"])
    assert api("budget=maybe").status_code == 400


def test_the_card_marks_each_figure_with_its_notes_listed_once(judged, admin_client):
    Annotation.objects.filter(dimension__name="Mistake_Identification", score=2).update(score=1)
    html = admin_client.get(f"/admin/evaluation/judging/{judged.pk}/").content.decode()
    listed = html[html.index('id="estimate-notes"') :]
    listed = listed[: listed.index("</ol>")]
    notes = [x.split("</li>")[0] for x in listed.split("<li>")[1:]]
    assert len(notes) == len(set(notes)) and "every value is 0: Wilson score interval of 0 of 120" in notes
    row = html[html.index('id="estimate-Mistake_Identification"') :]
    row = row[: row.index("</tr>")]
    k = notes.index("every value is 0: Wilson score interval of 0 of 120") + 1
    assert (
        row.count(f'<sup class="note" title="every value is 0: Wilson score interval of 0 of 120">{k}</sup>') == 3
    )  # judge, people, corrected
    assert "[0.000, 0.000]" not in row
