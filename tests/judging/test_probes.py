"""Judge bias probes: a judge (the loopback LLM server, answering what the test decided for each response) whose
gap to people grows with the response's length, or differs by the response's source, is found out; one
without that bias is not. Every p-value is checked against the OLS and ANOVA formulas and the
Benjamini-Yekutieli step-up written out here."""

import json
import random

import numpy as np
import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from evaluation.judging import probes, selectors, services
from evaluation.judging.values import rubric_spec
from evaluation.models import Annotation, Item, JudgeConfiguration, JudgeScore
from tests.judging.test_probes_rules import anova, by_adjusted, ols

pytestmark = pytest.mark.django_db

RUBRIC = "tutor-response"
TUTORS = ("Alpha", "Beta", "Gamma", "Delta")
LONG = 120
"""Responses are 5 to LONG words; a length-biased judge rates one up with probability words / LONG."""
BIASED_LENGTH, BIASED_SOURCE = "Actionability", "Tutor_Tone"


def build(*, biased: bool, dialogues: int = 40, seed: int = 7):
    """Candidate sets, and what the judge says of each response: {text: {dimension: place}}. People's places
    are 0 or 1; the judge's are the people's plus noise that depends on nothing, except (biased) one level up
    on BIASED_LENGTH with probability words / LONG, and on BIASED_SOURCE for most of Alpha's responses."""
    rng = random.Random(seed)
    dims = {d.name: d.scale.levels for d in rubric_spec(services.rubric_get(RUBRIC)).dimensions}
    records, judge = [], {}
    for d in range(dialogues):
        turns = rng.randint(1, 5)
        history = [
            {"role": "tutor" if t % 2 == 0 else "student", "content": f"Turn {t} of dialogue {d}."}
            for t in range(turns)
        ]
        responses = {}
        for tutor in TUTORS:
            words = rng.randint(5, LONG)
            text = " ".join([f"d{d}-{tutor}"] + ["word"] * (words - 1))
            people = {name: rng.randint(0, 1) for name in dims}
            said = {name: max(0, min(2, q + rng.choice([-1, 0, 0, 1]))) for name, q in people.items()}
            if biased:
                said[BIASED_LENGTH] = people[BIASED_LENGTH] + (rng.random() < words / LONG)
                said[BIASED_SOURCE] = people[BIASED_SOURCE] + (tutor == "Alpha" and rng.random() < 0.8)
            judge[text] = said
            labels = [{"annotator": "ann", "labels": {n: dims[n][q] for n, q in people.items()}}]
            if d % 4 == 0:  # a second annotator one level up: the people's lower median stays ann's
                labels.append({"annotator": "ben", "labels": {n: dims[n][q + 1] for n, q in people.items()}})
            responses[tutor] = {"response": text, "annotation": labels}
        records.append({"conversation_id": f"c{d}", "conversation_history": history, "anno_llm_responses": responses})
    return records, judge


def judge_with(loopback, records, judge) -> JudgeConfiguration:
    """Import the records and judge them through the real OpenAI SDK against the loopback server, which
    answers each response with the places the test chose for it."""
    from evaluation.providers.loopback import Reply, requested_schema

    def responder(endpoint, body, n):
        schema = requested_schema(endpoint, body)["properties"]["scores"]["properties"]
        text = body["messages"][-1]["content"].split("# Candidate tutor response\n", 1)[1]
        places = judge[text]
        return Reply(
            json={
                "scores": {
                    name: {"value": list(reversed(s["properties"]["value"]["enum"]))[places[name]], "rationale": ""}
                    for name, s in schema.items()
                }
            }
        )

    services.transcripts_import(json.dumps(records), file="probes.json")
    loopback.responder = responder
    report = services.transcripts_judge(rubric=RUBRIC, provider=f"openai/judge-m@{loopback.openai_url}", workers=4)
    assert report.judged == len(judge) and not report.failed, report.failed[:3]
    return JudgeConfiguration.objects.get()


def stored(configuration):
    """dimension -> item -> gap, and item -> (words, tutor, turn), straight from the stored rows."""
    judge, people = {}, {}
    for item, dim, score in JudgeScore.objects.filter(configuration=configuration).values_list(
        "item_id", "dimension__name", "score"
    ):
        judge.setdefault(dim, {}).setdefault(item, []).append(score)
    for item, dim, score in Annotation.objects.values_list("item_id", "dimension__name", "score"):
        people.setdefault(dim, {}).setdefault(item, []).append(score)
    gaps = {
        dim: {
            i: np.percentile(v, 50, method="lower") - np.percentile(people[dim][i], 50, method="lower")
            for i, v in per.items()
        }
        for dim, per in judge.items()
    }
    traits = {
        item.pk: (len(item.response.split()), item.key, len(item.transcript.messages) + 1)
        for item in Item.objects.select_related("transcript")
    }
    return gaps, traits


def check_against_formulas(table, configuration):
    gaps, traits = stored(configuration)
    expected = {}
    for dim, gap in gaps.items():
        items = sorted(gap)
        y = [gap[i] for i in items]
        expected[(dim, "length")] = ols([traits[i][0] for i in items], y)
        expected[(dim, "position")] = ols([traits[i][2] for i in items], y)
        expected[(dim, "source")] = anova([[gap[i] for i in items if traits[i][1] == t] for t in TUTORS])
    assert {(r.dimension, r.probe) for r in table.probes} == set(expected)
    assert all(not r.reason and r.n == 160 for r in table.probes), [r.reason for r in table.probes if r.reason]
    keys = list(expected)
    adjusted = dict(zip(keys, by_adjusted([expected[k][1] for k in keys]), strict=True))
    assert table.tested == len(keys) == 24
    for r in table.probes:
        statistic, p = expected[(r.dimension, r.probe)]
        assert r.statistic == pytest.approx(statistic, rel=1e-9), (r.dimension, r.probe)
        assert r.p == pytest.approx(p, rel=1e-6, abs=1e-300), (r.dimension, r.probe)
        assert r.p_adjusted == pytest.approx(adjusted[(r.dimension, r.probe)], rel=1e-6, abs=1e-300)
        assert r.finding == (adjusted[(r.dimension, r.probe)] <= 0.05), (r.dimension, r.probe)


def test_a_judge_whose_gap_grows_with_length_or_differs_by_source_is_found_out(loopback):
    configuration = judge_with(loopback, *build(biased=True))
    table = selectors.bias_probes(configuration)
    check_against_formulas(table, configuration)
    found = {(r.dimension, r.probe): r for r in table.findings}
    assert set(found) == {(BIASED_LENGTH, "length"), (BIASED_SOURCE, "source")}, [
        (r.dimension, r.probe, r.p_adjusted) for r in table.probes
    ]
    length = found[(BIASED_LENGTH, "length")]
    # one level up with probability words / 120: about 0.83 levels per 100 words
    assert 0.5 < length.statistic * 100 < 1.2 and length.statistic > 0
    assert length.detail.startswith(f"judge minus people rises by {length.statistic * 100:.2f} levels per 100 words")
    assert "the judge rates longer items higher than people do" in length.detail
    source = found[(BIASED_SOURCE, "source")]
    assert source.groups[0][:2] == ("Alpha", 40) and source.groups[0][2] > 0.5
    assert all(abs(mean) < 0.3 for _, _, mean in source.groups[1:])
    assert source.detail.startswith(f"judge minus people averages {source.groups[0][2]:+.2f} levels on Alpha")


def test_a_judge_without_that_bias_shows_no_finding(loopback):
    configuration = judge_with(loopback, *build(biased=False))
    table = selectors.bias_probes(configuration)
    check_against_formulas(table, configuration)
    assert table.findings == () and min(r.p_adjusted for r in table.probes) > 0.05


def _traits(n, *, words=None, source=None, position=None):
    return {
        i: probes.ItemTraits(
            words=words if words is not None else 10 + i,
            source=source if source is not None else TUTORS[i % 2],
            position=position if position is not None else 2 + i % 3,
        )
        for i in range(n)
    }


def _by_probe(table):
    return {r.probe: r for r in table.probes}


def test_a_probe_with_too_little_data_says_why_and_is_never_a_finding():
    few = _by_probe(probes.bias_probes({"tone": {i: i % 2 for i in range(9)}}, _traits(9)))
    for probe in probes.PROBES:
        r = few[probe]
        assert r.reason == "9 items with both the judge's value and people's: the probe needs 10", probe
        assert (r.p, r.p_adjusted, r.finding, r.n) == (None, None, False, 9)
    ten = _by_probe(probes.bias_probes({"tone": {i: i % 2 for i in range(10)}}, _traits(10)))
    assert all(not r.reason for r in ten.values())

    gap = {i: i % 3 for i in range(12)}
    same = _by_probe(probes.bias_probes({"tone": gap}, _traits(12, words=30, source="Alpha", position=4)))
    assert same["length"].reason == "every item is 30 words long: nothing to regress on"
    assert same["source"].reason == "one source (Alpha) with 2+ items: nothing to compare"
    assert same["position"].reason == "every item is turn 4: nothing to regress on"

    flat = _by_probe(probes.bias_probes({"tone": {i: 1 for i in range(12)}}, _traits(12)))
    assert {r.reason for r in flat.values()} == {"the gap is +1 on every item: it cannot vary with anything"}

    # a source of one item is left out of the analysis of variance, and named
    lone = _traits(12)
    lone[0] = probes.ItemTraits(words=5, source="Solo", position=2)
    r = _by_probe(probes.bias_probes({"tone": gap}, lone))["source"]
    assert r.n == 11 and not r.reason and r.detail.endswith("; left out, under 2 items: Solo")
    assert [g[:2] for g in sorted(r.groups)] == [("Alpha", 5), ("Beta", 6)]
    only = {i: probes.ItemTraits(10 + i, "Alpha" if i < 11 else "Solo", 2) for i in range(12)}
    r = _by_probe(probes.bias_probes({"tone": gap}, only))["source"]
    assert r.reason == "one source (Alpha) with 2+ items: nothing to compare; left out, under 2 items: Solo"

    # whole conversations have no position; the other probes still run, and only those are adjusted
    sessions = {i: probes.ItemTraits(10 + i, TUTORS[i % 2], None) for i in range(12)}
    table = probes.bias_probes({"tone": gap}, sessions)
    position = _by_probe(table)["position"]
    assert position.reason == "the rubric judges whole conversations: no item has a position in one"
    assert table.tested == 2 and position.p_adjusted is None


def test_item_traits_count_the_judged_words_and_the_turn():
    history = [{"role": "tutor", "content": "What is 3 x 4?"}, {"role": "student", "content": "It is 7."}]
    response = probes.item_traits(
        unit="response", key="GPT4", response=" Not quite:  try again ", source="s", messages=history
    )
    assert response == probes.ItemTraits(words=4, source="GPT4", position=3)
    session = probes.item_traits(unit="session", key="", response="", source="mathia", messages=history)
    assert session == probes.ItemTraits(words=5, source="mathia", position=None)


def test_the_judge_card_shows_the_finding(loopback, staff_client):
    configuration = judge_with(loopback, *build(biased=True))
    html = staff_client.get(f"/admin/evaluation/judging/{configuration.pk}/").content.decode()
    assert '<h2 id="probes">Bias probes</h2>' in html and "All 24 p-values adjusted together" in html
    findings = html.split('<ul class="findings" id="probe-findings">', 1)[1].split("</ul>", 1)[0]
    assert findings.count('<li class="finding"') == 2
    length = selectors.bias_probes(configuration).findings[0]
    assert f"<strong>{BIASED_LENGTH}, length:</strong> judge minus people rises by" in findings
    assert f"(n=160, p {length.p:.2g}, adjusted {length.p_adjusted:.2g})" in findings
    # the dimension as people read it (Tutor_Tone -> "Tutor Tone")
    assert "<strong>Tutor Tone, source:</strong> judge minus people averages" in findings
    assert html.count('<tr id="probe-') == 24
    row = html.split('<tr id="probe-Coherence-length">', 1)[1].split("</tr>", 1)[0]
    assert "no finding: judge minus people" in row


def test_the_card_says_when_nothing_survives(staff_client):
    services.transcripts_import(json.dumps(build(biased=False, dialogues=2)[0]), file="few.json")
    services.transcripts_judge(rubric=RUBRIC, provider="offline")
    configuration = JudgeConfiguration.objects.get()
    html = staff_client.get(f"/admin/evaluation/judging/{configuration.pk}/").content.decode()
    assert "No finding: no probe's gap survives the adjustment (no probe could run)." in html
    assert "No probe could run, so no p-value was adjusted." in html
    assert "could not run: 8 items with both the judge&#x27;s value and people&#x27;s: the probe needs 10" in html


def viewer_auth(django_user_model) -> dict[str, str]:
    viewer = django_user_model.objects.create_user("v", password="x" * 16, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=viewer).key}"}


def test_the_api_and_the_agreement_command_give_the_probes(loopback, client, django_user_model, capsys):
    configuration = judge_with(loopback, *build(biased=True))
    table = selectors.bias_probes(configuration)
    expected = json.loads(json.dumps(table.as_dict()))
    assert expected["tested"] == 24 and len(expected["probes"]) == 24

    body = client.get(f"/api/judging/agreement?rubric={RUBRIC}", **viewer_auth(django_user_model)).json()
    api = body["configurations"][0]["probes"]
    assert api == expected
    assert {(p["dimension"], p["probe"]) for p in api["probes"] if p["finding"]} == {
        (BIASED_LENGTH, "length"),
        (BIASED_SOURCE, "source"),
    }
    assert body["configurations"][0]["dimensions"][0]["dimension"] == api["probes"][0]["dimension"]

    call_command("agreement", "--rubric", RUBRIC, "--json")
    assert json.loads(capsys.readouterr().out)[0]["probes"] == expected

    call_command("agreement", "--rubric", RUBRIC)
    out = capsys.readouterr().out
    section = out.split("Bias probes (judge minus people, in levels, on the items with both): ", 1)[1].splitlines()
    assert (
        section[0]
        == "24 p-values adjusted together by Benjamini-Yekutieli; a finding needs an adjusted p of 0.05 or less"
    )
    length, source = table.findings
    assert (
        f"  {BIASED_LENGTH}, length: {length.detail} (n=160, p {length.p:.2g}, adjusted {length.p_adjusted:.2g})"
        in section
    )
    assert (
        f"  {BIASED_SOURCE}, source: {source.detail} (n=160, p {source.p:.2g}, adjusted {source.p_adjusted:.2g})"
        in section
    )
    assert "  Coherence: no finding (3 of 3 probes ran)" in section
    # one line per dimension: each dimension here has at most one finding
    dimensions = [d.name for d in rubric_spec(services.rubric_get(RUBRIC)).dimensions]
    assert [line.split(",")[0].split(":")[0].strip() for line in section[1:]] == dimensions


def test_the_command_says_why_no_probe_could_run(capsys):
    services.transcripts_import(json.dumps(build(biased=False, dialogues=2)[0]), file="few.json")
    services.transcripts_judge(rubric=RUBRIC, provider="offline")
    call_command("agreement", "--rubric", RUBRIC)
    out = capsys.readouterr().out
    assert "Bias probes (judge minus people, in levels, on the items with both): no probe could run" in out
    reason = "8 items with both the judge's value and people's: the probe needs 10"
    assert f"  Coherence: no finding (0 of 3 probes ran)\n    length could not run: {reason}\n" in out
    assert f"    source could not run: {reason}\n    position could not run: {reason}" in out
    call_command("agreement", "--rubric", RUBRIC, "--json")
    probes_data = json.loads(capsys.readouterr().out)[0]["probes"]
    assert probes_data["tested"] == 0 and all(p["reason"] == reason for p in probes_data["probes"])
