"""Small corners a crawl found: the judging upload's address answers a GET with the page its form is on (not a
blank 405), and the admin names provider batches in the plural as English does."""

import pytest

from evaluation.models import ProviderBatch


@pytest.mark.django_db
def test_the_upload_address_sends_a_get_to_the_judge_cards_page(staff_client):
    response = staff_client.get("/admin/evaluation/judging/import")
    assert response.status_code == 302 and response["Location"] == "/admin/evaluation/judging/"
    assert staff_client.post("/admin/evaluation/judging/import").status_code == 302  # the form's POST still imports


@pytest.mark.django_db
def test_the_admin_says_provider_batches(staff_client):
    assert ProviderBatch._meta.verbose_name_plural == "provider batches"
    html = staff_client.get("/admin/").content.decode()
    assert "Provider batches" in html and "Provider batchs" not in html
