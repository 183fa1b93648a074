"""What judging costs: direct calls through the real SDKs against the loopback server are counted (calls, tokens,
cached tokens) and priced at the price table's prices, and --dry-run prices the job and sends nothing."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.judging import services
from evaluation.models import JudgeScore
from tests.judging.test_judge import import_set

pytestmark = pytest.mark.django_db

OPUS = {"input": 5.0, "cached_input": 0.50, "cache_write": 6.25, "output": 25.0}  # prices/vendors.yaml, per 1M
SONNET = {"input": 3.0, "cached_input": 0.30, "cache_write": 3.75, "output": 15.0}


@pytest.fixture
def prices(db):
    call_command("load_prices", stdout=StringIO())


@pytest.mark.parametrize("model", ["claude-opus-4-6", "claude-sonnet-4-6"])
def test_direct_judging_counts_and_prices_every_call_with_its_cached_tokens(loopback, prices, model):
    import_set()  # two candidate responses
    provider = f"anthropic/{model}@{loopback.anthropic_url}"
    # One worker: the first call writes the rubric's prefix (about 1,300 tokens with the schema's instruction)
    # to the cache, the three after it read it; but only where the model caches a prefix that short: Sonnet
    # 4.6 does (from 1,024 tokens), Opus 4.6 does not (from 4,096), so there every call pays the full price.
    report = services.transcripts_judge(rubric="tutor-response", provider=provider, repeats=2, workers=1)
    assert report.judged == 4 and report.failed == ()
    billed = loopback.billed  # what the server's answers reported, summed on its side
    usage = report.usage
    assert usage.calls == loopback.count() == 4
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens, usage.output_tokens) == (
        billed["input_tokens"],
        billed["cached_input_tokens"],
        billed["cache_write_tokens"],
        billed["output_tokens"],
    )
    price = OPUS if model == "claude-opus-4-6" else SONNET
    if model == "claude-opus-4-6":
        assert usage.cache_write_tokens == usage.cached_input_tokens == 0
    else:
        assert usage.cache_write_tokens > 1024 and usage.cached_input_tokens == 3 * usage.cache_write_tokens
    # The price worked by hand: uncached input, cache reads, cache writes and output each at their price.
    plain = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens
    expected = (
        plain * price["input"]
        + usage.cached_input_tokens * price["cached_input"]
        + usage.cache_write_tokens * price["cache_write"]
        + usage.output_tokens * price["output"]
    ) / 1e6
    assert report.cost_usd == pytest.approx(expected, rel=1e-9) and report.cost_usd > 0
    uncached = (usage.input_tokens * price["input"] + usage.output_tokens * price["output"]) / 1e6
    assert report.cost_usd == pytest.approx(uncached) if model == "claude-opus-4-6" else report.cost_usd < uncached
    assert report.unpriced == ""
    text = str(report)
    assert f"4 calls, {usage.input_tokens:,} input tokens ({usage.cached_input_tokens:,} cached, " in text
    assert f"{usage.cache_write_tokens:,} cache writes), {usage.output_tokens:,} output tokens, ${expected:.4f}" in text


def test_the_command_prints_calls_tokens_and_cost_and_skipped_items_cost_nothing(loopback, prices, capsys):
    import_set()
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", provider)
    out = capsys.readouterr().out
    billed = loopback.billed
    expected = (
        (billed["input_tokens"] - billed["cached_input_tokens"]) * 1.75
        + billed["cached_input_tokens"] * 0.175
        + billed["output_tokens"] * 14.0
    ) / 1e6
    assert f"2 judged, 0 already judged; 2 calls, {billed['input_tokens']:,} input tokens" in out
    assert f"{billed['output_tokens']:,} output tokens, ${expected:.4f}" in out and expected > 0
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", provider)
    assert (
        "0 judged, 2 already judged; 0 calls, 0 input tokens (0 cached, 0 cache writes), 0 output tokens, $0.0000"
        in (capsys.readouterr().out)
    )
    assert loopback.count() == 2


def test_an_unpriced_judge_is_named_not_shown_as_free(loopback, prices):
    import_set()
    report = services.transcripts_judge(rubric="tutor-response", provider=f"openai/mystery-7b@{loopback.openai_url}")
    assert report.usage.calls == 2 and report.cost_usd == 0.0
    assert report.unpriced == "mystery-7b" and "no price for model mystery-7b" in str(report)
    assert "$" not in str(report).split("calls, ")[1]


def test_dry_run_prints_the_forecast_and_sends_nothing(loopback, prices):
    import_set()
    out = StringIO()
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    call_command(
        "judge_imported",
        "--rubric",
        "tutor-response",
        "--provider",
        provider,
        "--repeats",
        "3",
        "--dry-run",
        stdout=out,
    )
    text = out.getvalue()
    assert "rubric_judge: 6 calls to openai/gpt-5.2" in text and "In all: 6 calls" in text
    assert "by batch $" in text and "nothing was judged or sent" in text
    assert loopback.count() == 0 and not JudgeScore.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rubric", "nope"], "nope"),
        (["--rubric", "tutor-response", "--repeats", "0"], "repeats"),
        (["--rubric", "tutor-response", "--provider", "nobody"], "provider"),
        (["--rubric", "tutor-response", "--canary-only"], "--canary-only"),
    ],
    ids=["unknown-rubric", "repeats-0", "unknown-provider", "canary-only"],
)
def test_a_bad_dry_run_names_what_is_wrong(loopback, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("judge_imported", *args, "--dry-run", stdout=StringIO())
    assert loopback.count() == 0
