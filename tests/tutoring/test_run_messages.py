"""A run's conversation as the judge and the reports read it: the newest attempt's messages only."""

import pytest
from django.utils import timezone

from evaluation.models import EvaluationRun, RunMessage
from evaluation.tutoring.selectors import conversation, run_messages

pytestmark = pytest.mark.django_db


def test_run_messages_are_the_newest_attempts_in_turn_order_and_match_the_queryset():
    run = EvaluationRun.objects.create(run_id="run_messages_attempts", attempt=3)
    now = timezone.now()
    stored = [  # (attempt, turn, role): stored out of order; attempt 3 stored nothing
        (2, 2, "tutor"), (1, 1, "tutor"), (2, 1, "tutor"), (1, 2, "student"), (2, 2, "student"), (1, 3, "tutor"),
    ]  # fmt: skip
    for attempt, turn, role in stored:
        RunMessage.objects.create(
            run=run, attempt=attempt, turn=turn, role=role, content=f"{attempt}/{turn}/{role}", timestamp=now
        )
    messages = run_messages(run)
    assert [m["content"] for m in messages] == ["2/1/tutor", "2/2/tutor", "2/2/student"]
    assert [m["content"] for m in messages] == [m.content for m in conversation(run)]
    assert messages[0] == {
        "turn": 1,
        "role": "tutor",
        "content": "2/1/tutor",
        "timestamp": now.isoformat(),
        "metadata": {},
    }
    assert run_messages(EvaluationRun.objects.create(run_id="run_messages_none")) == []
