"""Prices as data: the shipped file, the table, the price in force on a date, cached and batch prices, the limit."""

import datetime as dt
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import ModelPrice
from evaluation.providers import CostLimitReached, Meter, Usage, estimate_cost
from evaluation.providers.pricing import price_file, price_for, read_price_file

pytestmark = pytest.mark.django_db

TODAY = dt.datetime.now(dt.UTC).date()


def row(model="acme-1", *, vendor="acme", on=dt.date(2025, 1, 1), **prices):
    values = {"input": 2.0, "output": 10.0, "cached_input": 0.2, "cache_write": 2.5, "batch_discount": 0.5} | prices
    return ModelPrice.objects.create(
        vendor=vendor,
        model=model,
        effective_from=on,
        input_per_mtok=Decimal(str(values["input"])),
        output_per_mtok=Decimal(str(values["output"])),
        cached_input_per_mtok=Decimal(str(values["cached_input"])),
        cache_write_per_mtok=Decimal(str(values["cache_write"])),
        batch_discount=Decimal(str(values["batch_discount"])),
    )


def test_each_kind_of_token_at_its_price_and_the_batch_discount():
    row()
    usage = Usage(input_tokens=10_000, output_tokens=3_000, cached_input_tokens=6_000, cache_write_tokens=1_000)
    # Worked by hand: 3,000 plain input at $2, 6,000 cached at $0.20, 1,000 written at $2.50, 3,000 output at $10.
    direct = (3_000 * 2.0 + 6_000 * 0.2 + 1_000 * 2.5 + 3_000 * 10.0) / 1e6
    assert direct == pytest.approx(0.0397)
    assert estimate_cost("acme-1", usage) == pytest.approx(0.0397)
    assert estimate_cost("acme-1", usage, batch=True) == pytest.approx(0.0397 * 0.5)


def test_thinking_is_billed_inside_output_tokens_not_on_top():
    # Both vendors report thinking inside output_tokens (OpenAI's reasoning_tokens are a part of output_tokens;
    # Anthropic bills thinking as output): thinking_tokens is a breakdown, never priced a second time.
    row()
    with_thinking = Usage(input_tokens=0, output_tokens=1_000, thinking_tokens=400)
    assert estimate_cost("acme-1", with_thinking) == pytest.approx(1_000 * 10.0 / 1e6)


def test_the_shipped_file_loads_and_prices_the_vendors_models():
    call_command("load_prices")
    entries = {(e.vendor, e.model): e for e in read_price_file()}
    assert {"gpt-5.2", "claude-opus-4-6", "claude-haiku-4-5"} <= {m for _, m in entries}
    assert all(e.batch_discount == Decimal("0.5") for e in entries.values())
    opus = entries[("anthropic", "claude-opus-4-6")]
    # Anthropic: cache writes 1.25x input, cache reads 0.1x input.
    assert opus.prices["cache_write"] == opus.prices["input"] * Decimal("1.25")
    assert opus.prices["cached_input"] == opus.prices["input"] / 10
    usage = Usage(input_tokens=2_000_000, output_tokens=1_000_000, cached_input_tokens=1_000_000)
    assert estimate_cost("gpt-5.2", usage) == pytest.approx(1 * 1.75 + 1 * 0.175 + 1 * 14.0)


def test_a_dated_snapshot_prices_as_its_base_name_and_a_variant_does_not():
    row("acme-1")
    usage = Usage(input_tokens=1_000_000)
    assert estimate_cost("acme-1-2026-01-15", usage) == pytest.approx(2.0)
    assert estimate_cost("acme-1-20260115", usage) == pytest.approx(2.0)
    assert estimate_cost("acme-1-pro", usage) == 0.0
    assert price_for("acme-1-pro") is None


def test_the_price_in_force_on_the_call_date():
    row(on=dt.date(2025, 1, 1), input=2.0)
    row(on=TODAY + dt.timedelta(days=30), input=1.0)
    row(on=dt.date(2025, 6, 1), input=3.0)
    assert price_for("acme-1", dt.date(2025, 3, 1)).input == 2.0
    assert price_for("acme-1", dt.date(2025, 6, 1)).input == 3.0
    assert price_for("acme-1", dt.date(2024, 12, 31)) is None  # not in force yet
    assert estimate_cost("acme-1", Usage(input_tokens=1_000_000)) == pytest.approx(3.0)  # today's, not next month's


def test_an_unknown_model_costs_0_and_the_meter_names_it():
    meter = Meter()
    usage = Usage(input_tokens=500, output_tokens=50, calls=1)
    assert estimate_cost("mystery-7b", usage) == 0.0
    meter.add("judge", usage, 0.0, "openai", model="mystery-7b")
    meter.add("simulator", usage, 0.0, "offline", model="offline-rules-v1")
    assert meter.unpriced == {"mystery-7b"}
    assert meter.as_dict()["unpriced"] == ["mystery-7b"]
    assert Meter().restore(meter.as_dict(), meter.cost_usd).unpriced == {"mystery-7b"}


def test_the_cache_is_read_once_and_a_saved_row_is_seen_at_once(django_assert_num_queries):
    price = row()
    usage = Usage(input_tokens=1_000_000)
    assert estimate_cost("acme-1", usage) == pytest.approx(2.0)
    with django_assert_num_queries(0):
        for _ in range(100):
            estimate_cost("acme-1", usage)
    price.input_per_mtok = Decimal("4")
    price.save()
    assert estimate_cost("acme-1", usage) == pytest.approx(4.0)
    price.delete()
    assert estimate_cost("acme-1", usage) == 0.0


def test_cost_limit_counts_cached_and_batch_prices():
    row()
    limit = 0.05
    # 10 calls of 10,000 input tokens and 1,000 output: uncached, each costs $0.03 and the limit stops the third.
    call = Usage(input_tokens=10_000, output_tokens=1_000, calls=1)
    cached = Usage(input_tokens=10_000, output_tokens=1_000, cached_input_tokens=9_000, calls=1)
    assert estimate_cost("acme-1", call) == pytest.approx(0.03)
    assert estimate_cost("acme-1", cached) == pytest.approx((1_000 * 2 + 9_000 * 0.2 + 1_000 * 10) / 1e6)

    def calls_before_the_limit(usage, *, batch=False):
        meter = Meter(limit_usd=limit)
        made = 0
        with pytest.raises(CostLimitReached):
            for _ in range(100):
                meter.check()
                meter.add("judge", usage, estimate_cost("acme-1", usage, batch=batch), "acme", model="acme-1")
                made += 1
        return made

    assert calls_before_the_limit(call) == 2  # $0.03, $0.06 >= $0.05
    assert calls_before_the_limit(call, batch=True) == 4  # $0.015 each
    assert calls_before_the_limit(cached) == 4  # $0.0138 each


def test_load_prices_keeps_a_row_staff_edited_in_the_admin(staff_client, tmp_path):
    call_command("load_prices")
    gpt = ModelPrice.objects.get(vendor="openai", model="gpt-5.2", effective_from=dt.date(2025, 12, 11))
    page = staff_client.get(f"/admin/evaluation/modelprice/{gpt.pk}/change/")
    assert page.status_code == 200
    form = {
        "vendor": "openai",
        "model": "gpt-5.2",
        "effective_from": "2025-12-11",
        "input_per_mtok": "1.5",
        "output_per_mtok": "14",
        "cached_input_per_mtok": "0.175",
        "cache_write_per_mtok": "1.75",
        "batch_discount": "0.5",
        "source": "negotiated",
    }
    assert staff_client.post(f"/admin/evaluation/modelprice/{gpt.pk}/change/", form).status_code == 302
    gpt.refresh_from_db()
    assert gpt.edited_in_admin and gpt.input_per_mtok == Decimal("1.5")
    assert estimate_cost("gpt-5.2", Usage(input_tokens=1_000_000)) == pytest.approx(1.5)

    edited = tmp_path / "prices.yaml"
    text = price_file().read_text(encoding="utf-8")
    edited.write_text(text.replace("input: 1.75", "input: 2.0").replace("input: 0.25", "input: 0.3"), encoding="utf-8")
    out = StringIO()
    call_command("load_prices", "--file", str(edited), stdout=out)
    assert "kept (edited in the admin): openai/gpt-5.2 from 2025-12-11" in out.getvalue()
    assert "updated: openai/gpt-5-mini from 2025-08-07" in out.getvalue()
    gpt.refresh_from_db()
    assert gpt.input_per_mtok == Decimal("1.5")
    assert ModelPrice.objects.get(model="gpt-5-mini").input_per_mtok == Decimal("0.3")
    out = StringIO()
    call_command("load_prices", "--file", str(edited), stdout=out)
    assert "0 created, 0 updated" in out.getvalue()


@pytest.mark.parametrize(
    "body, field",
    [
        ("prices: 3", "prices"),
        ("prices:\n  - {vendor: a, model: m, effective_from: '1 May'}", "effective_from"),
        ("prices:\n  - {vendor: a, model: m, effective_from: 2025-13-01}", "month must be in 1..12"),
        (
            "prices:\n  - {vendor: a, model: m, effective_from: 2025-01-01, input: -1, output: 1,"
            " cached_input: 1, cache_write: 1, batch_discount: 0.5}",
            "input",
        ),
        (
            "prices:\n  - {vendor: a, model: m, effective_from: 2025-01-01, input: 1, output: 1,"
            " cached_input: 1, cache_write: 1, batch_discount: 1.5}",
            "batch_discount",
        ),
        ("prices:\n  - {model: m}", "vendor"),
        ("prices: [&a {vendor: a}, *a]", ""),
    ],
    ids=["not-a-list", "not-a-date", "bad-date", "negative", "discount-over-1", "no-vendor", "alias"],
)
def test_a_bad_price_file_is_refused_naming_the_field(tmp_path, body, field):
    bad = tmp_path / "prices.yaml"
    bad.write_text(body, encoding="utf-8")
    with pytest.raises(CommandError, match=rf"prices.yaml.*{field}"):
        call_command("load_prices", "--file", str(bad))
    assert not ModelPrice.objects.filter(vendor="a").exists()


def priced_run(catalog, **fields):
    from evaluation.models import EvaluationRun, Persona, Topic

    defaults = {
        "run_id": "run_priced_1",
        "persona": Persona.objects.get(persona_id="simplicity_seeker"),
        "topic": Topic.objects.get(topic_id="comparing-decimals"),
        "status": "completed",
        "stage": "completed",
        "config": {
            "llm": {
                "tutor": {"provider": "openai", "model": "gpt-5.2"},
                "judge": {"provider": "openai", "model": "mystery-7b"},
            }
        },
        "token_usage": {
            "calls": 5,
            "input_tokens": 9000,
            "cached_input_tokens": 4000,
            "cache_write_tokens": 1000,
            "output_tokens": 700,
            "by_provider": {"openai": 5},
            "by_role": {
                "tutor": {"calls": 4, "input_tokens": 8000, "cached_input_tokens": 4000, "cache_write_tokens": 1000},
                "judge": {"calls": 1, "input_tokens": 1000, "output_tokens": 100},
            },
        },
        "cost_usd": 0.0123,
    }
    return EvaluationRun.objects.create(**(defaults | fields))


def test_the_run_page_and_the_api_show_cache_tokens_per_role_and_name_an_unpriced_model(staff_client, catalog):
    call_command("load_prices")
    run = priced_run(catalog)
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    usage = html.split('<section class="usage">')[1].split("</section>")[0]
    assert "5 LLM calls · 9,000 input tokens (4,000 read from the prompt cache, 1,000 written to it)" in usage
    assert "estimated cost $0.0123 without the calls to mystery-7b: no price for model mystery-7b" in usage
    assert "<td>tutor</td><td>4</td><td>8,000</td><td>4,000</td><td>1,000</td>" in usage

    body = staff_client.get(f"/api/evaluation/runs/{run.run_id}").json()
    assert body["usage"]["unpriced"] == ["mystery-7b"]
    assert body["usage"]["cached_input_tokens"] == 4000 and body["usage"]["cache_write_tokens"] == 1000
    tutor = next(r for r in body["usage"]["by_role"] if r["role"] == "tutor")
    assert (tutor["cached_input_tokens"], tutor["cache_write_tokens"]) == (4000, 1000)


def test_a_run_whose_only_model_has_no_price_does_not_show_as_free(staff_client, catalog):
    run = priced_run(
        catalog,
        config={"llm": {"judge": {"provider": "openai", "model": "mystery-7b"}}},
        token_usage={"calls": 1, "input_tokens": 10, "by_provider": {"openai": 1}, "by_role": {"judge": {"calls": 1}}},
        cost_usd=0.0,
    )
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    usage = html.split('<section class="usage">')[1].split("</section>")[0]
    assert "no price for model mystery-7b" in usage and "$0.0000" not in usage


def test_the_report_files_carry_the_usage_and_name_an_unpriced_model(catalog):
    from evaluation.tutoring import reports
    from evaluation.tutoring.selectors import run_report_context

    run = priced_run(catalog)
    usage = run_report_context(run)["usage"]
    assert usage["unpriced"] == ["mystery-7b"] and usage["cache_write_tokens"] == 1000
    lines = reports.usage_lines(usage)
    assert lines[0] == (
        "**Usage:** 5 LLM calls · 9,000 input tokens (4,000 read from the prompt cache, 1,000 written to it) · "
        "700 output tokens · estimated cost $0.0123 without the calls to mystery-7b: no price for model mystery-7b"
    )
    assert "- tutor: 4 calls, 8,000 input tokens (4,000 cache read, 1,000 cache write), 0 output tokens" in lines


def test_cost_limit_counts_cached_tokens_the_loopback_reports(loopback):
    from evaluation.providers import Message, ProviderSpec, get_llm

    call_command("load_prices", stdout=StringIO())
    spec = ProviderSpec("openai", "gpt-5.2", loopback.openai_url, {"api": "responses"})
    rubric = "You grade answers against this rubric. " * 300  # about 3,000 tokens: cached from the second call
    meter = Meter(limit_usd=1.0)
    llm = get_llm("judge", override=spec, meter=meter)
    first = llm.call([Message("system", rubric), Message("user", "2+2=4?")])
    second = llm.call([Message("system", rubric), Message("user", "3+3=6?")])
    assert first.usage.cached_input_tokens == 0 and second.usage.cached_input_tokens >= 2048
    assert meter.usage.cached_input_tokens == second.usage.cached_input_tokens

    def by_hand(u):  # gpt-5.2: $1.75 input, $0.175 cached input, $14 output per million tokens
        return (
            (u.input_tokens - u.cached_input_tokens) * 1.75 + u.cached_input_tokens * 0.175 + u.output_tokens * 14
        ) / 1e6

    assert second.cost_usd == pytest.approx(by_hand(second.usage)) and second.cost_usd < first.cost_usd
    assert meter.cost_usd == pytest.approx(by_hand(first.usage) + by_hand(second.usage))
    # A limit between the cached total and what the same calls cost uncached: the cached price keeps it open.
    from dataclasses import replace

    uncached = by_hand(first.usage) + by_hand(replace(second.usage, cached_input_tokens=0))
    meter.limit_usd = (meter.cost_usd + uncached) / 2
    meter.check()
    assert uncached >= meter.limit_usd
    assert loopback.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_failed_read_keeps_the_last_table_and_is_tried_again_seconds_later(settings, monkeypatch):
    """A read that fails (the database away, no connection free in a worker's pool) must not cost every LLM
    call the pool's timeout: the last table stays in use and the read is tried again READ_RETRY_SECONDS later."""
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from evaluation.providers import pricing

    monkeypatch.setattr(pricing, "READ_RETRY_SECONDS", 0.3)
    settings.EVALUATION = {**settings.EVALUATION, "PRICE_CACHE_SECONDS": 0}  # every call would read
    row()
    usage = Usage(input_tokens=1_000_000)
    assert estimate_cost("acme-1", usage) == pytest.approx(2.0)
    table = ModelPrice._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        with CaptureQueriesContext(connection) as tried:
            costs = [estimate_cost("acme-1", usage) for _ in range(50)]
        assert costs == [pytest.approx(2.0)] * 50  # the last table read, not "no price"
        assert len(tried) == 1, [q["sql"] for q in tried]  # one failed read, then none until the retry
        time.sleep(0.35)
        with CaptureQueriesContext(connection) as tried:
            estimate_cost("acme-1", usage)
        assert len(tried) == 1  # tried again
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    time.sleep(0.35)
    ModelPrice.objects.filter(model="acme-1").update(input_per_mtok=Decimal("4"))
    assert estimate_cost("acme-1", usage) == pytest.approx(4.0)  # read again once it can be
