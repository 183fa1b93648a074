"""The dashboard's start form prices a start before it is made: "Price it" shows the forecast and starts nothing."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from evaluation.models import EvaluationRun


@pytest.fixture
def prices(db):
    call_command("load_prices", stdout=StringIO())


def forecast_lines(html: str) -> str:
    return html.split('<div class="start-forecast"')[1].split("</div>")[0]


def test_price_it_shows_the_forecast_on_the_form_and_starts_nothing(staff_client, catalog, prices, loopback):
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    form = {
        "mode": "simulate",
        "topic_id": "comparing-decimals",
        "personas": ["ace", "struggler"],
        "max_turns": "6",
        "runs_per_persona": "2",
        "provider": provider,
        "price": "1",
    }
    answer = staff_client.post(reverse("evaluation-start"), form)
    assert answer.status_code == 302
    assert EvaluationRun.objects.count() == 0 and loopback.count() == 0

    html = staff_client.get(reverse("evaluation-dashboard")).content.decode()
    shown = forecast_lines(html)
    assert "nothing was started or sent" in shown
    # 2 personas x 2 runs x 6 turns: 24 simulator calls, 24 tutor calls, 4 judge calls.
    assert "simulator: 24 calls to openai/gpt-5.2" in shown and "judge: 4 calls to openai/gpt-5.2" in shown
    assert "In all: 52 calls" in shown and "direct $" in shown and "by batch $" in shown
    # The form keeps what was priced, so Start starts that.
    assert f'name="provider" value="{provider}"' in html and 'name="max_turns" min="5" max="40" value="6"' in html
    # Shown once: the next page load has no forecast.
    assert 'class="start-forecast"' not in staff_client.get(reverse("evaluation-dashboard")).content.decode()


def test_a_price_that_cannot_be_made_says_why_and_starts_nothing(staff_client, catalog, prices):
    form = {"mode": "simulate", "topic_id": "nope", "price": "1"}
    answer = staff_client.post(reverse("evaluation-start"), form, follow=True)
    assert "Not priced: topic_id: no topic &#x27;nope&#x27;" in answer.content.decode()
    assert EvaluationRun.objects.count() == 0
