"""The admin login refuses a user+address pair for a cool-off after repeated wrong passwords."""

from datetime import timedelta

from django.test import Client
from django.utils import timezone

ATTACKER = "203.0.113.7"


def log_in(client, password, address=ATTACKER):
    return client.post("/admin/login/?next=/admin/", {"username": "staff", "password": password}, REMOTE_ADDR=address)


def test_five_wrong_passwords_lock_the_user_at_that_address_for_fifteen_minutes(client, staff_user):
    for _ in range(4):
        response = log_in(client, "wrong-guess")
        assert (
            response.status_code == 200
            and "Please enter the correct username and password" in response.content.decode()
        )
    assert log_in(client, "wrong-guess").status_code == 429  # the fifth failure starts the lock

    response = log_in(client, "pw-staff-123")  # even the right password, now
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode() and "15 minutes" in response.content.decode()
    assert "_auth_user_id" not in client.session

    # The lock is for this user from this address: the staff member elsewhere still gets in.
    assert log_in(Client(), "pw-staff-123", address="198.51.100.9").status_code == 302

    from axes.models import AccessAttempt

    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=14))
    assert log_in(client, "pw-staff-123").status_code == 429  # still cooling off
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    response = log_in(client, "pw-staff-123")
    assert response.status_code == 302 and response["Location"] == "/admin/"


def test_a_success_before_the_limit_resets_the_count(client, staff_user):
    for _ in range(4):
        log_in(client, "wrong-guess")
    assert log_in(client, "pw-staff-123").status_code == 302
    client.logout()
    for _ in range(4):
        log_in(client, "wrong-guess")
    assert log_in(client, "pw-staff-123").status_code == 302
