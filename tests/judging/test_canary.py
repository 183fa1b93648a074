"""A canary set: labelled items a changed judge configuration judges first, and the card shows the shift."""

import json

import pytest
from django.core.management import CommandError, call_command

from evaluation.judging import selectors, services
from evaluation.models import Item, JudgeConfiguration, JudgeScore, Rubric
from tests.judging.synthetic import candidate_sets

pytestmark = pytest.mark.django_db


@pytest.fixture
def canary():
    services.transcripts_import(json.dumps(candidate_sets(12, 4, seed=8)), file="synthetic.json")
    ids = list(Item.objects.order_by("pk").values_list("pk", flat=True)[:20])
    services.canary_set(name="tutor-response-canary", rubric="tutor-response", item_ids=ids)
    return ids


def test_only_labelled_items_can_be_a_canary():
    services.transcripts_import(json.dumps(candidate_sets(1, 2, seed=8)), file="a.json")
    record = {
        "conversation_id": "u",
        "conversation_history": "Tutor: hi\nStudent: 3",
        "anno_llm_responses": {"x": {"response": "ok"}},
    }
    services.transcripts_import(json.dumps(record), file="b.json")
    bare = Item.objects.get(transcript__external_id="u").pk
    with pytest.raises(services.InvalidInput, match=rf"items \[{bare}\] have no labels on rubric 'tutor-response'"):
        services.canary_set(name="c", rubric="tutor-response", item_ids=[bare])


def test_a_changed_configuration_judges_the_canary_first_and_the_card_shows_the_change(canary, capsys):
    first = services.transcripts_judge(rubric="tutor-response", provider="offline")
    assert first.canary_items == 20 and first.judged == 48
    # nothing changed: the canary costs nothing
    again = services.canary_rejudge(rubric="tutor-response", provider="offline")
    assert (again.judged, again.skipped) == (0, 20)
    rubric = Rubric.objects.get(slug="tutor-response")
    rubric.judge_prompt = rubric.judge_prompt.replace("You are an expert evaluator", "You are a strict evaluator")
    rubric.save()
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", "offline", "--canary-only")
    assert "20 judged" in capsys.readouterr().out
    new = JudgeConfiguration.objects.order_by("-created_at").first()
    assert new.key != first.configuration and JudgeScore.objects.filter(configuration=new).count() == 20 * 8
    table = selectors.agreement_table(new)
    assert table.canary.canary == "tutor-response-canary" and table.canary.previous == first.configuration
    assert table.canary.items == 20 and len(table.canary.shifts) == 8
    shift = table.canary.shifts[0]
    assert shift.before.kappa.n == shift.after.kappa.n == 20
    # the offline rule reads the text; the prompt only reseeds its jitter, so scores move near level edges only
    assert all(abs(s.before.exact.value - s.after.exact.value) <= 0.2 for s in table.canary.shifts)
    call_command("agreement", "--rubric", "tutor-response", "--configuration", str(new.pk))
    assert f"Canary 'tutor-response-canary' (20 items), against {first.configuration}" in capsys.readouterr().out


def test_saving_a_changed_rubric_in_the_admin_queues_the_canary(
    canary, staff_client, q_sync, django_capture_on_commit_callbacks
):
    services.transcripts_judge(rubric="tutor-response", provider="offline")
    rubric = Rubric.objects.get(slug="tutor-response")
    page = staff_client.get(f"/admin/evaluation/rubric/{rubric.pk}/change/")
    data = form_data(page)
    data["version"] = "2"
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(f"/admin/evaluation/rubric/{rubric.pk}/change/", data, follow=True)
    assert "the canary set is being judged under the changed rubric" in response.content.decode()
    latest = JudgeConfiguration.objects.order_by("-created_at").first()
    assert latest.rubric_version == 2 and JudgeScore.objects.filter(configuration=latest).count() == 20 * 8
    html = staff_client.get(f"/admin/evaluation/judging/{latest.pk}/").content.decode()
    assert 'id="canary"' in html and "kappa before" in html


def test_canary_only_without_a_canary_is_refused():
    with pytest.raises(CommandError, match="has no canary set"):
        call_command("judge_imported", "--rubric", "tutor-response", "--canary-only")


def form_data(page) -> dict[str, str]:
    """What the browser would post back: the main form's and every inline form's current values."""
    data: dict[str, str] = {}
    forms = [page.context["adminform"].form]
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        data.update({f"{formset.prefix}-{k}": str(v) for k, v in formset.management_form.initial.items()})
        forms += formset.forms
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is None:
                continue
            data[form.add_prefix(name)] = str(value)
    return data
