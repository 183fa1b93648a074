"""Labelling queues through their services: claims (one holder at a time, expired ones handed out again),
blindness, adjudication's place in every figure, and who may see and do what."""

import json
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from evaluation.errors import Conflict, InvalidInput, NotFound
from evaluation.judging import agreement, selectors, services
from evaluation.models import Adjudication, Annotation, Item, JudgeConfiguration, JudgeScore, QueueItem, QueueLabel
from tests.judging.synthetic import candidate_sets

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model):
    services.transcripts_import(json.dumps(candidate_sets(6, 4, seed=3)), file="synthetic.json")
    services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=1, workers=1)
    ids = sorted(Item.objects.values_list("pk", flat=True))
    Annotation.objects.filter(item_id__in=ids[12:]).delete()  # the first 12 keep the import's labels
    users = {
        n: django_user_model.objects.create_user(n, password="x" * 16, is_staff=True)
        for n in ("owner", "alice", "bob", "carol", "dave")
    }
    return users, ids


def _queue(users, ids, **extra):
    options = {
        "name": "double",
        "rubric": "tutor-response",
        "owner": users["owner"],
        "items": ids[12:],
        "annotators": ["alice", "bob"],
        "adjudicators": ["carol"],
    } | extra
    return services.queue_create(**options)


def _labels(queue, level_of=lambda name, levels: levels[0]):
    return {d["name"]: level_of(d["name"], [x["value"] for x in d["levels"]]) for d in _view(queue)["dimensions"]}


def _view(queue):
    entry = queue.entries.first()
    return selectors.queue_item_view(queue, entry, queue.owner)


def test_two_people_never_hold_the_same_item_and_an_expired_claim_is_handed_out_again(world):
    users, ids = world
    queue = _queue(users, ids, claim_seconds=60, annotators=["alice", "bob", "dave"])
    a = services.queue_claim(queue=queue, user=users["alice"])
    b = services.queue_claim(queue=queue, user=users["bob"])
    assert a is not None and b is not None and a.pk != b.pk
    assert services.queue_claim(queue=queue, user=users["alice"]).pk == a.pk  # a reload shows the same item
    # every other item held too: the next person waits rather than share one
    QueueItem.objects.filter(queue=queue).exclude(pk__in=[a.pk, b.pk]).update(
        claimed_by=users["owner"], claim_expires=timezone.now() + timedelta(minutes=5)
    )
    assert services.queue_claim(queue=queue, user=users["dave"]) is None
    # bob's claim lapses: it goes to the next person who asks, and bob's late submission is refused
    QueueItem.objects.filter(pk=b.pk).update(claim_expires=timezone.now() - timedelta(seconds=1))
    again = services.queue_claim(queue=queue, user=users["dave"])
    assert again.pk == b.pk and QueueItem.objects.get(pk=b.pk).claimed_by == users["dave"]
    with pytest.raises(Conflict, match="someone else"):
        services.queue_submit(queue=queue, user=users["bob"], item_id=b.item_id, values=_labels(queue))
    services.queue_submit(queue=queue, user=users["dave"], item_id=b.item_id, values=_labels(queue))
    assert QueueItem.objects.get(pk=b.pk).claimed_by is None and QueueItem.objects.get(pk=b.pk).done == 1
    # someone not assigned gets nothing, not even the queue's existence
    with pytest.raises(NotFound):
        services.queue_claim(queue=queue, user=users["carol"])


def test_a_claim_taken_between_choosing_and_claiming_is_not_taken_twice(world):
    """The race made to happen: between alice's choice of the first free item and her claim of it, bob claims it
    (a statement run through Django's execute_wrapper, just before her UPDATE). Her claim is conditional, so it
    finds the item taken and she gets the next one; bob keeps his."""
    from django.db import connection

    users, ids = world
    queue = _queue(users, ids, items=ids[12:15])
    first = queue.entries.order_by("position").first()
    raced = []

    def bob_first(execute, sql, params, many, context):
        if not raced and sql.startswith("UPDATE") and "queueitem" in sql and "claimed_by_id" in sql:
            raced.append(sql)
            QueueItem.objects.filter(pk=first.pk).update(
                claimed_by=users["bob"], claim_expires=timezone.now() + timedelta(minutes=5)
            )
        return execute(sql, params, many, context)

    with connection.execute_wrapper(bob_first):
        got = services.queue_claim(queue=queue, user=users["alice"])
    assert raced, "the race was not staged: no claim UPDATE ran"
    assert got is not None and got.pk != first.pk
    assert QueueItem.objects.get(pk=first.pk).claimed_by == users["bob"]
    assert QueueItem.objects.get(pk=got.pk).claimed_by == users["alice"]


def test_each_item_gets_its_labels_from_different_people_and_counts_at_once(world):
    users, ids = world
    queue = _queue(users, ids, items=ids[12:16])
    configuration = JudgeConfiguration.objects.get()
    before = selectors.estimate_table("tutor-response", configuration=configuration.pk).labelled
    seen = {"alice": [], "bob": []}
    for _round in range(4):
        for who in ("alice", "bob"):
            entry = services.queue_claim(queue=queue, user=users[who])
            assert entry.item_id not in seen[who]
            seen[who].append(entry.item_id)
            services.queue_submit(queue=queue, user=users[who], item_id=entry.item_id, values=_labels(queue))
    assert sorted(seen["alice"]) == sorted(seen["bob"]) == ids[12:16]
    assert services.queue_claim(queue=queue, user=users["alice"]) is None  # all done
    assert set(queue.entries.values_list("done", flat=True)) == {2}
    after = selectors.estimate_table("tutor-response", configuration=configuration.pk).labelled
    assert after == before + 4  # the judge card's estimates read the queue's labels as soon as they are saved
    turns = QueueLabel.objects.filter(entry__queue=queue)
    assert turns.count() == 8 and all(t.seconds is not None and t.seconds >= 0 for t in turns)


def test_blind_hides_judge_scores_and_other_labels_until_ones_own_are_in(world):
    users, ids = world
    queue = _queue(users, ids, items=ids[12:14])
    first = services.queue_claim(queue=queue, user=users["alice"])
    services.queue_submit(queue=queue, user=users["alice"], item_id=first.item_id, values=_labels(queue))
    # bob now holds the item alice labelled: he sees neither her labels nor the judge's scores
    entry = services.queue_claim(queue=queue, user=users["bob"])
    assert entry.item_id == first.item_id
    view = selectors.queue_item_view(queue, entry, users["bob"])
    assert view["others"] == [] and view["judge"] == [] and not view["revealed"]
    services.queue_submit(queue=queue, user=users["bob"], item_id=entry.item_id, values=_labels(queue))
    view = selectors.queue_item_view(queue, entry, users["bob"])
    assert view["revealed"] and {o["annotator"] for o in view["others"]} == {"alice"}
    assert len(view["judge"]) == JudgeScore.objects.filter(item_id=entry.item_id).count() > 0
    # not blind: shown from the start
    open_queue = _queue(users, ids, name="open", items=ids[14:15], blind=False)
    view = selectors.queue_item_view(
        open_queue, services.queue_claim(queue=open_queue, user=users["bob"]), users["bob"]
    )
    assert view["revealed"] and view["judge"]


def test_a_submission_names_missing_and_off_scale_dimensions(world):
    users, ids = world
    queue = _queue(users, ids)
    entry = services.queue_claim(queue=queue, user=users["alice"])
    values = _labels(queue)
    name = next(iter(values))
    with pytest.raises(InvalidInput) as missing:
        services.queue_submit(queue=queue, user=users["alice"], item_id=entry.item_id, values={name: values[name]})
    assert "is required" in str(missing.value)
    with pytest.raises(InvalidInput, match=f"{name}: 'Maybe' is not on the scale"):
        services.queue_submit(queue=queue, user=users["alice"], item_id=entry.item_id, values=values | {name: "Maybe"})
    assert not Annotation.objects.filter(item_id=entry.item_id).exists()  # nothing half-written


def test_adjudication_stands_for_the_people_in_every_figure_and_the_raw_labels_stay(world):
    users, ids = world
    queue = _queue(users, ids, items=ids[12:20])
    dims = [d["name"] for d in _view(queue)["dimensions"]]
    target = dims[0]
    for who, pick in (("alice", 0), ("bob", -1)):
        for _ in range(8):
            entry = services.queue_claim(queue=queue, user=users[who])
            values = _labels(queue, lambda name, levels, pick=pick: levels[pick] if name == target else levels[0])
            services.queue_submit(queue=queue, user=users[who], item_id=entry.item_id, values=values)
    report = selectors.queue_report(queue)
    row = next(a for a in report.agreement if a.dimension == target)
    assert row.disagreements == 8 and row.exact == 0.0 and len(report.disagreements) == 8
    # the people's alpha is agreement.alpha_estimate on the raw labels, nothing else
    levels = [x["value"] for x in _view(queue)["dimensions"][0]["levels"]]
    assert row.alpha.value == agreement.alpha_estimate([[0, len(levels) - 1]] * 8, len(levels)).value
    configuration = JudgeConfiguration.objects.get()
    before = selectors.estimate_data(configuration)
    queue.adjudicators.add(users["alice"])  # an adjudicator who labelled the item may not settle it
    with pytest.raises(Conflict, match="third person"):
        services.queue_adjudicate(queue=queue, user=users["alice"], item_id=ids[12], values={target: levels[1]})
    with pytest.raises(NotFound):
        services.queue_adjudicate(queue=queue, user=users["dave"], item_id=ids[12], values={target: levels[1]})
    for item in ids[12:20]:
        services.queue_adjudicate(queue=queue, user=users["carol"], item_id=item, values={target: levels[1]})
    assert Annotation.objects.filter(item_id__in=ids[12:20], annotator__in=["alice", "bob"]).count() == 16 * len(dims)
    after = selectors.estimate_data(configuration)
    d_before = next(d for d in before if d.name == target)
    d_after = next(d for d in after if d.name == target)
    settled = dict(Adjudication.objects.filter(item_id__in=ids[12:20]).values_list("item_id", "score"))
    # estimates: the adjudicated value replaces the lower median of the two raw labels, and says so
    for item in ids[12:20]:
        assert d_before.people[item] == min(0, len(levels) - 1) == 0
        assert d_after.people[item] == int(settled[item]) == 1
    assert d_after.adjudicated == frozenset(ids[12:20]) and not d_before.adjudicated
    table = selectors.estimate_table("tutor-response", configuration=configuration.pk)
    assert table.adjudicated == 8 and table.as_dict()["adjudicated"] == 8
    # the judge card: judge vs people uses the adjudicated value; alpha and the alt-test only raw labels
    card = selectors.agreement_table(configuration)
    row = next(r for r in card.rows if r.dimension == target)
    assert row.adjudicated == 8
    judged = dict(
        JudgeScore.objects.filter(item_id__in=ids[12:20], dimension__name=target).values_list("item_id", "score")
    )
    exact = [judged[i] == 1 for i in ids[12:20]]
    base_rows = [(i, v) for i, v in d_after.people.items() if i not in settled]
    both = exact + [d_after.judged[i] == v for i, v in base_rows]
    assert row.judge_vs_humans.exact.value == pytest.approx(np.mean(both))
    assert selectors.table_as_dict(card)["dimensions"][0]["adjudicated"] == (
        8 if card.rows[0].dimension == target else 0
    )
    # the queue's own figures: the disagreements list carries the adjudication; agreement stays on raw labels
    report = selectors.queue_report(queue)
    assert report.adjudicated == 8 and all(d.adjudicated for d in report.disagreements)
    assert next(a for a in report.agreement if a.dimension == target).disagreements == 8
    rows = selectors.queue_export_rows(queue)
    kinds = {r["kind"] for r in rows}
    assert kinds == {"label", "adjudication"}
    assert all(r["adjudicated_value"] == levels[1] for r in rows if r["dimension"] == target)
    assert all(r["seconds"] is not None for r in rows if r["kind"] == "label")


def test_annotators_see_only_their_queues_and_the_owner_sees_everything(world):
    users, ids = world
    queue = _queue(users, ids)
    other = _queue(users, ids, name="other", annotators=["dave"], adjudicators=[])
    assert {q.name for q in selectors.queues_for(users["alice"])} == {"double"}
    assert {q.name for q in selectors.queues_for(users["owner"])} == {"double", "other"}
    with pytest.raises(NotFound):
        selectors.queue_get(other.pk, users["alice"])
    with pytest.raises(NotFound):
        services.queue_claim(queue=other, user=users["alice"])
    assert selectors.queue_role(queue, users["owner"]) == "owner"
    assert selectors.queue_role(queue, users["carol"]) == "adjudicator"
    assert selectors.queue_role(queue, users["alice"]) == "annotator"
    assert selectors.queue_role(queue, users["dave"]) is None
    assert "disagreements" in selectors.queue_report(queue).as_dict(owner=True)
    assert "disagreements" not in selectors.queue_report(queue).as_dict(owner=False)


def test_a_queue_from_label_next_picks_unlabelled_items_and_keeps_the_widths_at_the_start(world):
    users, ids = world
    configuration = JudgeConfiguration.objects.get()
    queue = _queue(users, ids, items=None, origin="label-next", count=6, configuration=configuration.pk)
    picked = list(queue.entries.values_list("item_id", flat=True))
    assert len(picked) == 6 and set(picked) <= set(ids[12:])
    assert queue.origin_detail.startswith("label next for")
    assert set(queue.start_widths) == {d.name for d in selectors.estimate_data(configuration)}
    sample = _queue(users, ids, items=None, origin="random", count=5, seed=1)
    assert sample.entries.count() == 5
    with pytest.raises(InvalidInput, match="annotators: no such user: 'nobody'"):
        _queue(users, ids, annotators=["nobody"])
    with pytest.raises(InvalidInput, match="labels_per_item"):
        _queue(users, ids, labels_per_item=0)


# --- the API ---------------------------------------------------------------------------------------------


def _api(user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def api_world(world):
    from django.contrib.auth.models import Group

    users, ids = world
    for name in ("owner", "alice", "bob", "carol", "dave"):
        users[name].groups.add(Group.objects.get(name="operator"))
    return users, ids


def test_the_api_makes_a_queue_hands_out_items_blind_and_takes_labels(api_world):
    users, ids = api_world
    owner = _api(users["owner"])
    made = owner.post(
        "/api/judging/queues",
        {"name": "api", "rubric": "tutor-response", "origin": "items", "items": ids[12:14], "annotators": ["alice"]},
        format="json",
    )
    assert made.status_code == 201, made.content
    queue = made.json()["id"]
    assert made.json()["items"] == 2 and made.json()["blind"] is True
    assert owner.post(f"/api/judging/queues/{queue}/items", {"items": [ids[14]]}, format="json").json() == {
        "added": 1,
        "items": 3,
    }
    people = owner.post(f"/api/judging/queues/{queue}/people", {"annotators": ["alice", "bob"]}, format="json")
    assert people.json()["annotators"] == ["alice", "bob"]
    # alice labels the first item
    alice, bob = _api(users["alice"]), _api(users["bob"])
    first = alice.post(f"/api/judging/queues/{queue}/next").json()
    assert first["item"] in ids[12:15] and first["judge"] == [] and first["others"] == []
    labels = {d["name"]: d["levels"][0]["value"] for d in first["dimensions"]}
    done = alice.post(f"/api/judging/queues/{queue}/labels", {"item": first["item"], "labels": labels}, format="json")
    assert done.status_code == 200 and done.json()["seconds"] >= 0
    # bob gets that item next (its second label first), blind: no judge score, nothing of alice's in the body
    second = bob.post(f"/api/judging/queues/{queue}/next")
    assert second.json()["item"] == first["item"]
    text = second.content.decode()
    assert second.json()["judge"] == [] and second.json()["others"] == [] and "alice" not in text
    # a label off the scale names the dimension; a missing one says it is required
    name = next(iter(labels))
    bad = bob.post(
        f"/api/judging/queues/{queue}/labels",
        {"item": first["item"], "labels": {**labels, name: "Maybe"}},
        format="json",
    )
    assert bad.status_code == 400 and name in bad.json()["fields"]
    # someone else's held item: 409; not on the queue: 404, and no queue of theirs is listed
    other = alice.post(f"/api/judging/queues/{queue}/labels", {"item": first["item"], "labels": labels}, format="json")
    assert other.status_code == 200  # alice changes her own earlier labels: allowed
    held = _api(users["owner"]).post(
        f"/api/judging/queues/{queue}/labels", {"item": first["item"], "labels": labels}, format="json"
    )
    assert held.status_code == 409 and "someone else" in held.json()["error"]
    dave = _api(users["dave"])
    assert dave.post(f"/api/judging/queues/{queue}/next").status_code == 404
    assert dave.get(f"/api/judging/queues/{queue}").status_code == 404
    assert dave.get("/api/judging/queues").json() == []
    # progress: the annotator sees the figures but not the items where people differ; the owner sees all
    mine = alice.get(f"/api/judging/queues/{queue}").json()
    assert mine["role"] == "annotator" and "disagreements" not in mine
    assert {p["name"]: p["labelled"] for p in mine["people"]} == {"alice": 1, "bob": 0}
    full = owner.get(f"/api/judging/queues/{queue}").json()
    assert full["role"] == "owner" and "disagreements" in full and full["people_value"].startswith("the adjudicated")
    assert alice.get(f"/api/judging/queues/{queue}/labels").status_code == 403
    rows = owner.get(f"/api/judging/queues/{queue}/labels").json()["rows"]
    assert {r["annotator"] for r in rows} == {"alice"} and all(r["rubric_version"] >= 1 for r in rows)
    # only the owner changes the queue
    assert alice.post(f"/api/judging/queues/{queue}/items", {"items": [ids[15]]}, format="json").status_code == 403


def test_the_api_settles_a_disagreement_and_the_estimates_say_so(api_world):
    users, ids = api_world
    owner = _api(users["owner"])
    queue = owner.post(
        "/api/judging/queues",
        {
            "name": "settle",
            "rubric": "tutor-response",
            "items": ids[12:13],
            "annotators": ["alice", "bob"],
            "adjudicators": ["carol"],
        },
        format="json",
    ).json()["id"]
    for who, pick in (("alice", 0), ("bob", -1)):
        client = _api(users[who])
        item = client.post(f"/api/judging/queues/{queue}/next").json()
        labels = {d["name"]: d["levels"][pick]["value"] for d in item["dimensions"]}
        assert (
            client.post(
                f"/api/judging/queues/{queue}/labels", {"item": item["item"], "labels": labels}, format="json"
            ).status_code
            == 200
        )
    body = owner.get(f"/api/judging/queues/{queue}").json()
    assert len(body["disagreements"]) == 1 and body["disagreements"][0]["item"] == ids[12]
    name = body["disagreements"][0]["differing"][0]
    settled = _api(users["carol"]).post(
        f"/api/judging/queues/{queue}/adjudications",
        {"item": ids[12], "labels": {name: body["disagreements"][0]["labels"][0]["value"]}},
        format="json",
    )
    assert settled.status_code == 200 and settled.json()["adjudicated"] == 1
    assert (
        _api(users["alice"])
        .post(f"/api/judging/queues/{queue}/adjudications", {"item": ids[12], "labels": {name: "Yes"}}, format="json")
        .status_code
        == 404
    )  # an annotator is no adjudicator
    estimates = owner.get("/api/judging/estimates", {"rubric": "tutor-response"}).json()
    assert estimates["adjudicated"] == 1 and "adjudicated" in estimates["people_value"]
    agreement = owner.get("/api/judging/agreement", {"rubric": "tutor-response"}).json()
    row = next(d for d in agreement["configurations"][0]["dimensions"] if d["dimension"] == name)
    assert row["adjudicated"] == 1
    export = owner.get(f"/api/judging/queues/{queue}/labels").json()["rows"]
    assert [r["kind"] for r in export].count("adjudication") == 1
    assert {r["adjudicator"] for r in export if r["dimension"] == name} == {"carol"}


# --- the pages, the admin and the command -------------------------------------------------------------------


def _client(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def test_the_labelling_page_is_blind_skips_and_goes_back(api_world):
    users, ids = api_world
    queue = _queue(users, ids, items=ids[12:14])
    url = f"/admin/evaluation/judging/queues/{queue.pk}/label"
    alice, bob = _client(users["alice"]), _client(users["bob"])
    page = alice.get(url).content.decode()
    item = int(page.split('name="item" value="')[1].split('"')[0])
    assert 'id="blind-note"' in page and 'data-key="1"' in page
    form = {"item": item, "action": "submit"} | {f"label_{k}": v for k, v in _labels(queue).items()}
    assert alice.post(url, form).status_code == 302
    judge_values = set(JudgeScore.objects.filter(item_id=item).values_list("rationale", flat=True)) - {""}
    page = bob.get(url).content.decode()
    assert f'name="item" value="{item}"' in page  # the item alice labelled, bob's second label
    assert "alice" not in page and 'id="revealed"' not in page
    assert not any(r in page for r in judge_values)
    # bob skips it: it is not handed to him again, and alice's next is the other item
    assert bob.post(url, {"item": item, "action": "skip"}).status_code == 302
    page = bob.get(url).content.decode()
    assert f'name="item" value="{item}"' not in page and 'id="label-form"' in page
    assert QueueLabel.objects.get(entry__item_id=item, user=users["bob"]).skipped
    # back: alice's earlier item, her labels checked and, hers being in, the judge's scores shown
    back = alice.get(f"{url}?item={item}").content.decode()
    assert 'id="already"' in back and 'id="revealed"' in back and "checked" in back
    # an item she never had is not shown to her
    assert alice.get(f"{url}?item={ids[0]}").status_code == 404
    # the queue's page: progress for everyone on it; the items where people differ for the owner only
    assert 'id="disagreement-list"' not in alice.get(f"/admin/evaluation/judging/queues/{queue.pk}/").content.decode()
    owner_page = _client(users["owner"]).get(f"/admin/evaluation/judging/queues/{queue.pk}/").content.decode()
    assert 'id="disagreement-list"' in owner_page and 'id="person-alice"' in owner_page
    assert _client(users["dave"]).get(f"/admin/evaluation/judging/queues/{queue.pk}/").status_code == 404
    csv_text = _client(users["owner"]).get(f"/admin/evaluation/judging/queues/{queue.pk}/labels.csv").content.decode()
    assert csv_text.splitlines()[0].split(",") == list(selectors.EXPORT_FIELDS) and ",alice," in csv_text
    assert alice.get(f"/admin/evaluation/judging/queues/{queue.pk}/labels.csv").status_code == 404


def test_a_queue_is_made_from_the_judge_card_the_admin_and_the_command(api_world):
    from io import StringIO

    from django.core.management import CommandError, call_command

    from evaluation.models import LabelQueue

    users, ids = api_world
    configuration = JudgeConfiguration.objects.get()
    owner = _client(users["owner"])
    card = owner.get(f"/admin/evaluation/judging/{configuration.pk}/").content.decode()
    assert 'id="make-queue"' in card
    made = owner.post(
        f"/admin/evaluation/judging/{configuration.pk}/queue",
        {"name": "from the card", "count": "5", "annotators": "alice, bob", "labels_per_item": "2", "blind": "on"},
    )
    queue = LabelQueue.objects.get(name="from the card")
    assert made["Location"] == f"/admin/evaluation/judging/queues/{queue.pk}/"
    assert queue.entries.count() == 5 and queue.origin == "label-next" and queue.blind
    refused = owner.post(f"/admin/evaluation/judging/{configuration.pk}/queue", {"annotators": "nobody"})
    assert refused.status_code == 302 and not LabelQueue.objects.filter(annotators__username="nobody").exists()
    admin = _client(users["owner"])
    users["owner"].is_superuser = True
    users["owner"].save()
    form = admin.post(
        "/admin/evaluation/labelqueue/add/",
        {
            "name": "from the admin",
            "rubric": "tutor-response",
            "origin": "random",
            "count": "4",
            "seed": "0",
            "annotators": [users["alice"].pk],
            "labels_per_item": "1",
            "blind": "on",
            "claim_seconds": "600",
        },
    )
    assert form.status_code == 302, form.content.decode()[:2000]
    assert LabelQueue.objects.get(name="from the admin").entries.count() == 4
    bad = admin.post(
        "/admin/evaluation/labelqueue/add/",
        {"name": "x", "rubric": "tutor-response", "origin": "filter", "labels_per_item": "1", "claim_seconds": "600"},
    )
    assert bad.status_code == 200 and "a filter needs a source" in bad.content.decode()
    out = StringIO()
    call_command(
        "queue", "make", "from the command", "--rubric", "tutor-response", "--from", "random", "--count", "3",
        "--annotators", "alice,bob", "--owner", "owner", stdout=out,
    )  # fmt: skip
    pk = LabelQueue.objects.get(name="from the command").pk
    assert f"queue {pk} 'from the command': 3 items" in out.getvalue()
    shown = StringIO()
    call_command("queue", "show", str(pk), stdout=shown)
    assert "alice" in shown.getvalue() and "Krippendorff's alpha" in shown.getvalue()
    exported = StringIO()
    call_command("queue", "export", str(pk), "--format", "json", stdout=exported)
    assert json.loads(exported.getvalue()) == []
    with pytest.raises(CommandError, match="no such user: 'nobody'"):
        call_command("queue", "make", "x", "--rubric", "tutor-response", "--annotators", "nobody", "--owner", "owner")
