"""Starting a run: a persona or topic file edited since it was loaded is named in a warning at every
door (the admin's edit wins where there is one); an unapproved topic is refused at every door; the
dashboard's form keeps the chosen topic and personas after a start."""

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.catalog import catalog_load
from evaluation.errors import InvalidInput
from evaluation.models import EvaluationRun, Persona
from evaluation.tutoring import services

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.fixture
def own_catalog(tmp_path):
    """The shipped topics and one persona, loaded from a folder the test may edit."""
    personas, topics = tmp_path / "personas", tmp_path / "topics"
    personas.mkdir()
    shutil.copy(ROOT / "personas" / "ace.json", personas)
    shutil.copytree(ROOT / "topics", topics)
    report = catalog_load(personas_dir=personas, topics_dir=topics, propositions_dir=None)
    assert report.ok, report.errors
    return tmp_path


def edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2))


def start(**kwargs):
    return services.run_start(topic_id="comparing-decimals", persona="ace", enqueue=False, **kwargs)


def test_the_shipped_catalog_as_loaded_warns_of_nothing(catalog):
    (run,) = start()
    assert "catalog_warnings" not in run.config


def test_a_persona_file_edited_since_loading_is_named_with_the_command_that_loads_it(own_catalog):
    (run,) = start()
    assert "catalog_warnings" not in run.config
    edit(own_catalog / "personas" / "ace.json", name="Ace, renamed in the file")
    (run,) = start()
    (warning,) = run.config["catalog_warnings"]
    assert str(own_catalog / "personas" / "ace.json") in warning
    assert "persona ace" in warning and "manage.py load_catalog" in warning
    assert run.persona.name != "Ace, renamed in the file"  # the run uses what was loaded


def test_where_the_admin_edited_the_record_the_warning_says_its_edit_wins(own_catalog):
    edit(own_catalog / "topics" / "comparing-decimals.json", name="Decimals, renamed in the file")
    Persona.objects.filter(persona_id="ace").update(name="Ace, renamed in the admin")
    edit(own_catalog / "personas" / "ace.json", name="Ace, renamed in the file")
    (run,) = start()
    topic, persona = run.config["catalog_warnings"]
    assert "comparing-decimals.json" in topic and "topic comparing-decimals" in topic
    assert "ace.json" in persona and "the admin's edit wins" in persona and "--force" in persona


def test_a_file_that_would_not_load_now_is_named_too(own_catalog):
    (own_catalog / "personas" / "ace.json").write_text("{not json")
    (run,) = start()
    (warning,) = run.config["catalog_warnings"]
    assert "ace.json" in warning and "would not load now" in warning and "invalid JSON" in warning


@pytest.mark.django_db(transaction=True)
def test_the_cli_prints_the_warning(own_catalog):
    edit(own_catalog / "personas" / "ace.json", name="Ace, renamed in the file")
    err = StringIO()
    call_command(
        "run_evaluation",
        "--topic-id=comparing-decimals",
        "--persona=ace",
        "--max-turns=1",
        "--provider=offline",
        stdout=StringIO(),
        stderr=err,
    )
    assert "warning: " in err.getvalue() and "ace.json changed since persona ace was loaded" in err.getvalue()


def test_an_unapproved_topic_is_refused_by_the_service_the_api_and_the_form(catalog, staff_client):
    with pytest.raises(InvalidInput) as caught:
        services.run_start(topic_id="area-and-perimeter", persona="ace", enqueue=False)
    assert caught.value.problems[0].field == "topic_id"
    reason = caught.value.problems[0].reason
    assert "'area-and-perimeter' is not approved" in reason and "admin" in reason and "load_catalog" in reason
    api = staff_client.post(
        "/api/evaluation/start",
        json.dumps({"topic_id": "area-and-perimeter", "persona_file": "ace"}),
        content_type="application/json",
    )
    assert api.status_code == 400, api.content
    assert "area-and-perimeter" in json.dumps(api.json()) and "not approved" in json.dumps(api.json())
    page = staff_client.post(
        "/admin/evaluation/start", {"topic_id": "area-and-perimeter", "personas": ["ace"]}, follow=True
    ).content.decode()
    assert "Not started: " in page and "not approved" in page
    assert not EvaluationRun.objects.exists()
    form = staff_client.get("/admin/evaluation/").content.decode()
    assert 'value="area-and-perimeter"' not in form.split('name="topic_id"')[1].split("</select>")[0]


def test_the_form_keeps_the_chosen_topic_and_personas_after_a_start(catalog, staff_client):
    chosen = {"topic_id": "adding-fractions-like-denominators", "personas": ["ace", "quiet_one"], "max_turns": 3}
    response = staff_client.post("/admin/evaluation/start", chosen, follow=True)
    assert EvaluationRun.objects.count() == 2, response.content.decode()
    kept = response.context["start_choice"]
    assert kept["topic_id"] == "adding-fractions-like-denominators"
    assert kept["personas"] == ["ace", "quiet_one"]
    assert kept["max_turns"] == "3"
    page = response.content.decode()
    assert '<option value="adding-fractions-like-denominators" selected>' in page
    ticked = [p for p in ("ace", "quiet_one", "struggler") if f'value="{p}" checked>' in page]
    assert ticked == ["ace", "quiet_one"]
    assert "Filled in from your last start or price at " in page  # said, not silent
    cleared = staff_client.post("/admin/evaluation/start", {"forget": "1"}, follow=True).content.decode()
    assert (
        "Filled in from your last start" not in cleared
        and 'adding-fractions-like-denominators" selected' not in cleared
    )
    assert EvaluationRun.objects.count() == 2


def test_the_form_keeps_a_provider_at_a_url_for_the_next_page_only(catalog, staff_client):
    """A loopback or local server named in the provider is often gone by the next visit: the form kept it
    silently, and the next start failed against it. It is shown right after its price (Start starts what was
    priced), then forgotten."""
    base = {"topic_id": "comparing-decimals", "personas": ["ace"], "max_turns": 3, "price": "1"}
    page = staff_client.post("/admin/evaluation/start", {**base, "provider": "offline"}, follow=True).content.decode()
    assert 'name="provider" value="offline"' in page and "(provider offline)" in page
    assert 'name="provider" value="offline"' in staff_client.get("/admin/evaluation/").content.decode()
    spec = "openai/llama3@http://127.0.0.1:9/v1"
    page = staff_client.post("/admin/evaluation/start", {**base, "provider": spec}, follow=True).content.decode()
    assert f'name="provider" value="{spec}"' in page and "a provider at a URL only until you leave this page" in page
    later = staff_client.get("/admin/evaluation/").content.decode()
    assert spec not in later and 'name="provider" value=""' in later and 'value="comparing-decimals" selected' in later
