"""The agreement table from the database, through its three doors: the command, the API and the judge card."""

import json
import re

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from evaluation.judging import selectors, services
from evaluation.models import JudgeConfiguration
from tests.judging.synthetic import candidate_sets

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged():
    services.transcripts_import(json.dumps(candidate_sets(36, 8, seed=3)), file="synthetic.json")
    report = services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=2, workers=2)
    assert report.judged == 36 * 8 * 2 and not report.failed
    return JudgeConfiguration.objects.get()


def test_the_offline_judge_agrees_with_people_well_but_not_perfectly(judged):
    table = selectors.agreement_table(judged)
    assert (table.items, table.repeats, len(table.rows)) == (288, 2, 8)
    kappas = {row.dimension: row.judge_vs_humans.kappa for row in table.rows}
    assert all(k.n == 288 for k in kappas.values())
    assert sum(0.2 < k.value < 0.95 for k in kappas.values()) >= 6, {d: str(k) for d, k in kappas.items()}
    for row in table.rows:
        assert row.humans.n == 12 * 8  # every third dialogue has three annotators
        assert row.self_consistency.n == 288
        assert row.ceiling.annotators < 3 or row.ceiling.verdict in (
            "can stand in for a rater",
            "cannot stand in for a rater",
        )
        assert len(row.disagreements) == 10
    # the jitter moves scores near a level's edge only: some dimensions are fully consistent, not all
    assert any(row.self_consistency.value < 1.0 for row in table.rows)
    print({d: str(k) for d, k in kappas.items()})


def test_the_command_prints_the_table(judged, capsys):
    call_command("agreement", "--rubric", "tutor-response")
    out = capsys.readouterr().out
    assert judged.key in out and "288 items judged, 2 repeat(s)" in out
    line = next(line for line in out.splitlines() if line.startswith("Tutor_Tone"))
    assert re.search(r"Tutor_Tone\s+-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\] n=288", line), line
    call_command("agreement", "--rubric", "tutor-response", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data[0]["dimensions"][0]["judge_vs_humans"]["kappa_quadratic"]["n"] == 288
    with pytest.raises(CommandError, match="nothing judged with rubric 'tutor-session'"):
        call_command("agreement", "--rubric", "tutor-session")


def test_the_api_returns_the_same_numbers(client, judged, django_user_model):
    viewer = django_user_model.objects.create_user("v", password="x" * 16, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    auth = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=viewer).key}"}
    body = client.get("/api/judging/agreement?rubric=tutor-response", **auth).json()
    expected = selectors.table_as_dict(selectors.agreement_table(judged))
    assert body["configurations"] == [json.loads(json.dumps(expected))]
    tone = next(d for d in body["configurations"][0]["dimensions"] if d["dimension"] == "Tutor_Tone")
    assert tone["levels"] == ["Offensive", "Neutral", "Encouraging"] and len(tone["judge_vs_humans"]["confusion"]) == 3
    assert client.get("/api/judging/agreement?rubric=nope", **auth).status_code == 404
    assert (
        client.get(f"/api/judging/agreement?rubric=tutor-response&configuration={judged.pk + 1}", **auth).status_code
        == 404
    )
    assert client.get("/api/judging/agreement", **auth).json()["fields"] == {"rubric": ["This field is required."]}


def test_the_judge_card_page(client, judged, django_user_model):
    viewer = django_user_model.objects.create_user("v", password="x" * 16, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    html = client.get(f"/admin/evaluation/judging/{judged.pk}/").content.decode()
    assert "offline rule-based judge" in html and judged.key in html
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart confusion"') == 8
    assert html.count('<tr id="dim-') == 8
    link = re.search(r'href="(/admin/evaluation/judging/transcripts/\d+/#item-\d+)"', html).group(1)
    transcript = client.get(link.split("#")[0]).content.decode()
    assert f'id="{link.split("#")[1]}"' in transcript and "ann: <em>" in transcript
    index = client.get("/admin/evaluation/judging/").content.decode()
    assert f'href="/admin/evaluation/judging/{judged.pk}/"' in index
    assert client.get("/admin/evaluation/judging/999/").status_code == 404
