"""Whole batches that fail, expire or are cancelled at the vendor, through the real SDKs against the strict
loopback: the vendor's reason is stored and shown, the unanswered lines go out again as a new batch (smaller
when the vendor's token limit was the reason), never one by one at the direct price; a cancelled batch is
not sent again. Custom ids on the wire are short whatever the caller's keys."""

import pytest

from evaluation.models import ProviderBatch
from evaluation.providers import Message, ProviderSpec
from evaluation.providers.batch import BatchCall, batch_run
from evaluation.providers.client import LLM

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
SPECS = {
    "openai": lambda server: ProviderSpec("openai", "gpt-5.2", server.openai_url, {"api": "responses"}),
    "anthropic": lambda server: ProviderSpec("anthropic", "claude-haiku-4-5", server.anthropic_url),
}
ENDPOINT = {"openai": "responses", "anthropic": "messages"}


@pytest.fixture
def desk(loopback, settings):
    settings.EVALUATION = {**settings.EVALUATION, "BATCH_POLL_SECONDS": 0.01}
    loopback.batch_desk.reset()
    yield loopback.batch_desk
    loopback.batch_desk.reset()


def run(loopback, vendor: str, n: int, *, key_length: int = 8):
    """A batch of n lines whose keys are key_length characters long; (outcome, stored row, answers stored)."""
    llm = LLM(SPECS[vendor](loopback), "rubric_judge")
    targets = {f"{i:0{key_length}d}": i for i in range(n)}
    stored: dict = {}

    def call_for(i: int) -> BatchCall:
        return BatchCall((Message("system", "Judge."), Message("user", f"Line {i}.")), SCHEMA)

    outcome = batch_run(
        llm,
        kind="test_lines",
        job={"n": n, "vendor": vendor, "keys": key_length},
        targets=targets,
        call_for=call_for,
        store=lambda answers, failed: stored.update(answers=answers, failed=failed),
    )
    return outcome, ProviderBatch.objects.get(kind="test_lines"), stored


def test_a_batch_the_vendor_fails_for_its_token_limit_goes_out_again_in_halves(loopback, desk):
    desk.fates.append("failed")
    outcome, row, stored = run(loopback, "openai", 6)
    assert outcome is not None and sorted(stored["answers"]) == sorted(row.custom_ids) and stored["failed"] == {}
    # The failed batch, then its lines in two batches of 3 (half of what the limit refused); no direct call.
    assert desk.creates == 3 and loopback.count("responses") == 6 and outcome.retried == 0
    assert (row.state, row.resends, row.lost) == ("applied", 1, 0)
    assert "failed: token_limit_exceeded: Enqueued token limit reached for gpt-5.2" in row.reason
    # Every line at the batch price (the loopback's usage, priced with the batch discount), none direct.
    assert all(answer.latency_ms == 0.0 for answer in stored["answers"].values())


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_an_expired_batch_sends_its_unanswered_lines_again_and_names_why(loopback, desk, vendor):
    desk.fates.append("expired")
    desk.polls_to_end = 1
    outcome, row, stored = run(loopback, vendor, 4)
    assert outcome is not None and len(stored["answers"]) == 4 and stored["failed"] == {}
    assert desk.creates == 2 and loopback.count(ENDPOINT[vendor]) == 4  # 2 answered, 2 again in a new batch
    assert row.resends == 1 and "expired" in row.reason and outcome.retried == 0
    assert row.usage["calls"] == 4


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_a_batch_cancelled_at_the_vendor_is_not_sent_again_and_its_lines_fail_named(loopback, desk, vendor):
    desk.fates.append("cancelled")
    outcome, row, stored = run(loopback, vendor, 4)
    assert desk.creates == 1 and len(stored["answers"]) == 2
    assert sorted(stored["failed"]) == sorted(row.custom_ids)[2:]
    assert all("the whole batch: cancelled at the vendor" in why for why in stored["failed"].values())
    assert (row.state, row.lost, row.resends) == ("applied", 2, 0)
    assert loopback.count(ENDPOINT[vendor]) == 2  # the 2 cancelled lines never ran, nor went as direct calls


def test_a_batch_that_keeps_failing_gives_up_after_the_last_resend_naming_each_attempt(loopback, desk):
    desk.fates.extend(["expired"] * 10)
    outcome, row, stored = run(loopback, "anthropic", 16)
    # 16 lines: 8 answered, then 4, 2, 1 on each resend; the last line gives up after 3 resends.
    assert desk.creates == 4 and row.resends == 3 and len(stored["answers"]) == 15
    (why,) = stored["failed"].values()
    assert "the whole batch: expired" in why and "(sent 4 times)" in why
    assert row.reason.count("expired") == 3


def test_keys_longer_than_anthropics_custom_id_go_through_as_short_wire_ids(loopback, desk):
    outcome, row, stored = run(loopback, "anthropic", 3, key_length=100)
    assert outcome is not None and len(stored["answers"]) == 3 and loopback.refused == []
    assert all(len(key) == 100 for key in stored["answers"])


def test_anthropic_progress_says_the_vendor_counts_lines_only_when_the_batch_ends(loopback, desk):
    desk.polls_to_end = 2
    llm = LLM(SPECS["anthropic"](loopback), "rubric_judge")
    seen = []
    batch_run(
        llm,
        kind="test_lines",
        job={"progress": True},
        targets={"a": 0, "b": 1},
        call_for=lambda i: BatchCall((Message("user", f"Line {i}."),)),
        store=lambda answers, failed: None,
        on_progress=lambda done, total: seen.append((done, total, ProviderBatch.objects.get().stage_text)),
    )
    assert [s[:2] for s in seen] == [(0, 2), (0, 2), (2, 2)]
    assert seen[0][2] == "waiting on the provider's batch of 2 lines (Anthropic counts them when it ends)"
