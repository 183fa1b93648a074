"""Transcripts never make the reader's browser fetch anything: a Markdown image becomes a link."""

import uuid

import pytest
from django.utils import timezone

from evaluation.models import EvaluationRun, RunMessage
from evaluation.web.markdown import render_markdown

BEACON = "http://tracker.example/beacon.png"


@pytest.mark.parametrize(
    "text",
    [
        f"![b]({BEACON})",
        f'![b]({BEACON} "title")',
        f"![b][ref]\n\n[ref]: {BEACON}",
        f"see ![]({BEACON}) here",
        f"[![b]({BEACON})](https://example.org/page)",
    ],
)
def test_an_image_is_shown_as_a_link_and_never_loaded(text):
    html = render_markdown(text)
    assert "<img" not in html and "src=" not in html
    assert BEACON in html  # the reader can still see where it points


def test_an_image_link_names_the_image_and_points_at_it():
    html = render_markdown(f"look: ![a *tiny* chart]({BEACON})")
    assert f'href="{BEACON}"' in html
    assert "a tiny chart" in html  # the alt text, as plain text


def test_a_data_image_is_dropped_to_its_alt_text():
    html = render_markdown("![pixel](data:image/png;base64,iVBORw0KGgo=)")
    assert "<img" not in html and "data:" not in html and "pixel" in html


@pytest.mark.django_db
def test_report_page_shows_a_student_image_as_a_link(staff_client):
    run = EvaluationRun.objects.create(run_id=f"run_test_{uuid.uuid4().hex[:10]}", status="completed")
    RunMessage.objects.create(run=run, turn=1, role="student", content=f"![b]({BEACON})", timestamp=timezone.now())
    for url in (f"/admin/evaluation/runs/{run.run_id}/", f"/admin/evaluation/runs/{run.run_id}/live.json?after=0"):
        body = staff_client.get(url).content.decode()
        assert "tracker.example" in body, url  # the message is on the page
        assert "<img" not in body and "\\u003cimg" not in body, url
