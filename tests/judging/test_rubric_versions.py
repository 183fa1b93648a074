"""Rubric versions: a changed scale after labels exist is a new version; labels and judgements keep theirs,
and the judge card, the API and `manage.py agreement` read each against it."""

import json

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from evaluation.judging import selectors, services
from evaluation.judging.rubrics import SHIPPED_DIR
from evaluation.models import Annotation, Item, JudgeConfiguration, Rubric, RubricDimension, RubricVersion
from tests.judging.test_canary import form_data

pytestmark = pytest.mark.django_db

PEOPLE = ("ann", "ben", "cai")
ITEMS = 8


def pacing_label(i: int, person: int) -> int:
    """High values on purpose: most are off a 1-5 scale."""
    return 4 + (i + person) % 7  # 4..10


def records() -> list[dict]:
    out = []
    for i in range(ITEMS):
        messages = [
            {"role": "tutor", "content": f"What is {i} + {i}?"},
            {"role": "student", "content": "I am not sure, maybe " + "a lot " * i},
            {"role": "tutor", "content": "Let's count together. What do you think?"},
        ]
        labels = [
            {"annotator": who, "labels": {"pacing": pacing_label(i, p), "responsiveness": 1 + (i * 3 + p) % 10}}
            for p, who in enumerate(PEOPLE)
        ]
        out.append({"id": f"s-{i}", "messages": messages, "labels": labels})
    return out


@pytest.fixture
def labelled():
    """Eight conversations labelled by three people on pacing (1-10) and responsiveness, judged once (v1)."""
    services.transcripts_import(json.dumps(records()), file="sessions.json")
    report = services.transcripts_judge(rubric="tutor-session", provider="offline")
    assert report.judged == ITEMS and not report.failed
    return JudgeConfiguration.objects.get()


def narrow_pacing(admin_client, maximum: int = 5):
    """Staff change pacing's scale to 1-`maximum` through the rubric's admin change form."""
    rubric = Rubric.objects.get(slug="tutor-session")
    url = f"/admin/evaluation/rubric/{rubric.pk}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    data = form_data(page)
    pacing = RubricDimension.objects.get(rubric=rubric, name="pacing")
    field = next(k for k, v in data.items() if k.endswith("-id") and v == str(pacing.pk))
    data[field.removesuffix("-id") + "-scale_max"] = str(maximum)
    response = admin_client.post(url, data, follow=True)
    assert response.status_code == 200
    assert "errornote" not in response.content.decode(), response.content.decode()[:3000]
    return response


def viewer_auth(django_user_model) -> dict[str, str]:
    viewer = django_user_model.objects.create_user("v", password="x" * 16, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=viewer).key}"}


def pacing_of(version: RubricVersion) -> dict:
    return next(d for d in version.dimensions if d["name"] == "pacing")


def test_narrowing_a_labelled_scale_in_the_admin_makes_a_new_version_and_labels_keep_theirs(labelled, admin_client):
    before = {(a.item_id, a.annotator): a.value for a in Annotation.objects.filter(dimension__name="pacing")}
    assert max(int(v) for v in before.values()) == 10

    response = narrow_pacing(admin_client)

    assert "labels or judgements exist under v1, so the change is v2" in response.content.decode()
    rubric = Rubric.objects.get(slug="tutor-session")
    assert rubric.version == 2 and rubric.dimensions.get(name="pacing").scale_max == 5
    v1, v2 = RubricVersion.objects.filter(rubric=rubric).order_by("number")
    assert (v1.number, pacing_of(v1)["scale_max"]) == (1, 10)
    assert (v2.number, pacing_of(v2)["scale_max"]) == (2, 5)
    stored = Annotation.objects.filter(dimension__name="pacing").select_related("rubric_version")
    assert {(a.item_id, a.annotator): a.value for a in stored} == before
    assert {a.rubric_version.number for a in stored} == {1}
    # the same form saved again changes nothing
    narrow_pacing(admin_client)
    assert RubricVersion.objects.filter(rubric=rubric).count() == 2 and Rubric.objects.get(pk=rubric.pk).version == 2


def test_the_card_the_api_and_the_command_show_each_version(labelled, admin_client, client, django_user_model, capsys):
    narrow_pacing(admin_client)
    # people label two conversations on the new scale, and the judge judges under it
    pacing = RubricDimension.objects.get(rubric__slug="tutor-session", name="pacing")
    items = list(Item.objects.order_by("pk")[:2])
    for item in items:
        services.annotation_set(item_id=item.pk, dimension_id=pacing.pk, value=3, annotator="ann")
    assert Annotation.objects.filter(dimension=pacing).count() == ITEMS * 3 + 2  # the v1 labels stay
    report = services.transcripts_judge(rubric="tutor-session", provider="offline")
    assert report.judged == ITEMS and report.configuration.endswith("tutor-session v2")
    v2 = JudgeConfiguration.objects.exclude(pk=labelled.pk).get()
    assert v2.rubric_version == 2

    for configuration, levels, scale in ((labelled, 10, "1-10"), (v2, 5, "1-5")):
        page = admin_client.get(f"/admin/evaluation/judging/{configuration.pk}/")
        assert page.status_code == 200
        html = page.content.decode()
        assert f"tutor-session v{configuration.rubric_version}</span>" in html
        assert f'<span class="meta scale">{scale}</span>' in html and 'id="versions"' in html
        table = selectors.agreement_table(configuration)
        row = next(r for r in table.rows if r.dimension == "pacing")
        assert len(row.levels) == levels
    assert 'id="older-version"' in admin_client.get(f"/admin/evaluation/judging/{labelled.pk}/").content.decode()
    # pacing under v2: only the two labels made on 1-5; responsiveness did not change, so its v1 labels count
    table = selectors.agreement_table(v2)
    rows = {r.dimension: r for r in table.rows}
    assert rows["pacing"].judge_vs_humans.kappa.n == 2
    assert rows["responsiveness"].judge_vs_humans.kappa.n == ITEMS
    assert selectors.agreement_table(labelled).rows[3].judge_vs_humans.kappa.n == ITEMS
    assert table.off_scale == 0 and selectors.agreement_table(labelled).off_scale == 0

    body = client.get("/api/judging/agreement?rubric=tutor-session", **viewer_auth(django_user_model))
    assert body.status_code == 200
    data = body.json()
    assert data["current_version"] == 2
    assert [v["version"] for v in data["versions"]] == [2, 1]
    assert data["versions"][0]["changed"] == ["pacing"] and data["versions"][1]["labels"] == ITEMS * 3 * 2
    assert [c["rubric_version"] for c in data["configurations"]] == [2, 1]
    for table_data, levels in zip(data["configurations"], (5, 10), strict=True):
        pacing_row = next(d for d in table_data["dimensions"] if d["dimension"] == "pacing")
        assert len(pacing_row["levels"]) == levels and len(pacing_row["judge_vs_humans"]["confusion"]) == levels

    index = admin_client.get("/admin/evaluation/judging/").content.decode()
    assert "<h3>v2 (current)" in index and "<h3>v1 " in index and "changed: Pacing" in index
    page = admin_client.get(f"/admin/evaluation/judging/transcripts/{items[0].transcript_id}/")
    assert page.status_code == 200
    # the v1 and v2 pacing labels sit in two rows: one of each scale, the dimension named as people read it
    html = page.content.decode()
    assert html.count('<th title="pacing">Pacing</th>') == 1 and html.count('<th title="pacing">Pacing <span') == 1
    assert "<th>pacing" not in html

    call_command("agreement", "--rubric", "tutor-session")
    out = capsys.readouterr().out
    assert "rubric tutor-session v2:" in out and "rubric tutor-session v1:" in out
    assert out.index("rubric tutor-session v2:") < out.index("rubric tutor-session v1:")
    call_command("agreement", "--rubric", "tutor-session", "--json")
    assert [t["rubric_version"] for t in json.loads(capsys.readouterr().out)] == [2, 1]


def test_a_scale_narrowed_behind_the_admins_back_still_reads_its_labels_against_their_version(
    labelled, admin_client, client, django_user_model, capsys
):
    RubricDimension.objects.filter(rubric__slug="tutor-session", name="pacing").update(scale_max=5)
    assert admin_client.get(f"/admin/evaluation/judging/{labelled.pk}/").status_code == 200
    auth = viewer_auth(django_user_model)
    assert client.get("/api/judging/agreement?rubric=tutor-session", **auth).status_code == 200
    call_command("agreement", "--rubric", "tutor-session")
    assert "rubric tutor-session v1:" in capsys.readouterr().out
    table = selectors.agreement_table(labelled)
    pacing = next(r for r in table.rows if r.dimension == "pacing")
    assert len(pacing.levels) == 10 and pacing.judge_vs_humans.kappa.n == ITEMS
    # the next use of the rubric records the change as v2, with no label lost
    services.transcripts_judge(rubric="tutor-session", provider="offline")
    assert Rubric.objects.get(slug="tutor-session").version == 2
    assert Annotation.objects.filter(rubric_version__number=1).count() == ITEMS * 3 * 2


def test_values_off_their_versions_scale_are_left_out_and_counted(labelled, admin_client):
    """A database narrowed before versions were recorded: the one version on record has the narrow scale."""
    version = RubricVersion.objects.get(rubric__slug="tutor-session")
    dimensions = version.dimensions
    pacing_of(version)["scale_max"] = 5
    RubricVersion.objects.filter(pk=version.pk).update(dimensions=dimensions)
    off = sum(pacing_label(i, p) > 5 for i in range(ITEMS) for p in range(len(PEOPLE)))
    table = selectors.agreement_table(labelled)
    judged_off = sum(
        1 for value in labelled.scores.filter(dimension__name="pacing").values_list("score", flat=True) if value >= 5
    )
    assert table.off_scale == off + judged_off and off > 0
    page = admin_client.get(f"/admin/evaluation/judging/{labelled.pk}/")
    assert page.status_code == 200 and 'id="off-scale"' in page.content.decode()


def test_an_edit_with_nothing_labelled_or_judged_changes_the_version_in_place(admin_client):
    response = narrow_pacing(admin_client)
    assert "changed in place" in response.content.decode()
    rubric = Rubric.objects.get(slug="tutor-session")
    (version,) = RubricVersion.objects.filter(rubric=rubric)
    assert rubric.version == version.number == 1 and pacing_of(version)["scale_max"] == 5


def test_relabelling_under_a_new_version_keeps_the_earlier_label(labelled, admin_client):
    narrow_pacing(admin_client)
    pacing = RubricDimension.objects.get(rubric__slug="tutor-session", name="pacing")
    item = Item.objects.order_by("pk").first()
    earlier = Annotation.objects.get(item=item, dimension=pacing, annotator="ann")
    with pytest.raises(services.InvalidInput, match="allowed: an integer from 1 to 5"):
        services.annotation_set(item_id=item.pk, dimension_id=pacing.pk, value=8, annotator="ann")
    services.annotation_set(item_id=item.pk, dimension_id=pacing.pk, value=2, annotator="ann")
    services.annotation_set(item_id=item.pk, dimension_id=pacing.pk, value=1, annotator="ann")
    rows = Annotation.objects.filter(item=item, dimension=pacing, annotator="ann").order_by("rubric_version__number")
    assert [(a.rubric_version.number, a.value) for a in rows] == [(1, earlier.value), (2, "1")]


def test_reloading_a_rubric_file_is_idempotent_and_a_changed_file_is_a_new_version(labelled, tmp_path):
    shipped = SHIPPED_DIR / "tutor-session.json"
    for _ in range(2):
        services.rubric_load(shipped)
        assert RubricVersion.objects.filter(rubric__slug="tutor-session").count() == 1
        assert Rubric.objects.get(slug="tutor-session").version == 1
    doc = json.loads(shipped.read_text())
    next(d for d in doc["dimensions"] if d["name"] == "pacing")["scale"]["max"] = 5
    changed = tmp_path / "tutor-session.json"
    changed.write_text(json.dumps(doc))
    for _ in range(2):
        services.rubric_load(changed)
        assert list(
            RubricVersion.objects.filter(rubric__slug="tutor-session")
            .order_by("number")
            .values_list("number", flat=True)
        ) == [1, 2]
    assert Rubric.objects.get(slug="tutor-session").version == 2  # the file's "version": 1 does not lower it
    doc["version"] = 5
    changed.write_text(json.dumps(doc))
    services.rubric_load(changed)  # nothing labelled or judged under v2: raised in place
    assert list(RubricVersion.objects.filter(rubric__slug="tutor-session").values_list("number", flat=True)) == [5, 1]


def test_a_dimension_with_labels_cannot_be_deleted_in_the_admin(labelled, admin_client):
    rubric = Rubric.objects.get(slug="tutor-session")
    url = f"/admin/evaluation/rubric/{rubric.pk}/change/"
    data = form_data(admin_client.get(url))
    pacing = RubricDimension.objects.get(rubric=rubric, name="pacing")
    field = next(k for k, v in data.items() if k.endswith("-id") and v == str(pacing.pk))
    data[field.removesuffix("-id") + "-DELETE"] = "on"
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "would require deleting the following protected related objects" in response.content.decode()
    assert Annotation.objects.filter(dimension=pacing).count() == ITEMS * 3
