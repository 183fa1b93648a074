"""Shared fixtures: a staff user and the shipped catalogue loaded into the test database."""

from pathlib import Path

import pytest

from evaluation.catalog import catalog_load

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def catalog(db):
    report = catalog_load(
        personas_dir=ROOT / "personas", topics_dir=ROOT / "topics", propositions_dir=ROOT / "propositions"
    )
    assert report.ok, report.errors
    return report


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(
        "staff", "staff@example.com", "pw-staff-123", is_staff=True, is_superuser=True
    )


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client
