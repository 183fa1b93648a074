"""Judging by provider batch: the same scores as direct calls, failed lines retried one by one, the batch
stored so a process killed while it waits is resumed (not resubmitted) and its results stored once."""

import json
import os
import signal
import subprocess
import sys
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.judging import services
from evaluation.models import BatchState, Item, JudgeConfiguration, JudgeScore, LLMConfig, ProviderBatch
from evaluation.providers import Usage, estimate_cost
from evaluation.providers.batch import wire_ids
from evaluation.providers.loopback import LoopbackLLMServer, Reply, default_responder, example_for
from tests.judging.test_judge import POOR, import_set
from tests.servers import ROOT, database_url_for_tests

DIMENSIONS = 8  # the tutor-response rubric's


@pytest.fixture
def desk(loopback):
    loopback.batch_desk.reset()
    yield loopback.batch_desk
    loopback.batch_desk.reset()


def scores() -> dict[tuple[str, int, str], str]:
    rows = JudgeScore.objects.select_related("item", "dimension")
    return {(s.item.key, s.repeat, s.dimension.name): s.value for s in rows}


def custom_id(key: str, repeat: int = 1) -> str:
    return f"item-{Item.objects.get(key=key).pk}-r{repeat}"


@pytest.mark.django_db
def test_offline_batch_gives_the_direct_scores_and_is_stored_applied(capsys):
    import_set()
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", "offline", "--repeats", "2", "--batch")
    out = capsys.readouterr()
    assert "4 judged, 0 already judged; by offline batch offline-" in out.out
    assert "waiting on the provider's batch (4/4 done)" in out.err
    batch = ProviderBatch.objects.get()
    assert (batch.state, batch.vendor, batch.kind, batch.total, batch.done, batch.retried) == (
        BatchState.APPLIED,
        "offline",
        "judge_items",
        4,
        4,
        0,
    )
    assert sorted(batch.custom_ids) == sorted(custom_id(k, r) for k in ("good", "poor") for r in (1, 2))
    by_batch = scores()
    assert len(by_batch) == 2 * 2 * DIMENSIONS
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", "offline", "--repeats", "2", "--again")
    assert scores() == by_batch  # the direct calls give what the batch gave
    assert ProviderBatch.objects.count() == 1  # the direct path sends no batch


@pytest.mark.django_db
def test_openai_batch_retries_a_failed_line_directly_and_prices_lines_at_the_batch_price(loopback, desk):
    import_set()
    desk.polls_to_end = 1
    # The loopback sees the wire's short ids: "l0", "l1" by the sorted keys.
    desk.fail_ids = {wire_ids([custom_id("good"), custom_id("poor")])[custom_id("poor")]}
    report = services.transcripts_judge(
        rubric="tutor-response", provider=f"openai/gpt-5.2@{loopback.openai_url}", batch=True
    )
    assert (report.judged, report.failed, report.retried) == (2, (), 1)
    assert desk.creates == 1
    assert loopback.count("chat") == 3  # two lines in the batch, one direct call for the failed line
    batch = ProviderBatch.objects.get()
    assert (batch.state, batch.total, batch.done, batch.failed, batch.retried, batch.lost) == ("applied", 2, 1, 1, 1, 0)
    assert batch.polls == 2  # once in progress, once ended
    assert JudgeScore.objects.count() == 2 * DIMENSIONS
    assert scores()[("poor", 1, "Mistake_Identification")] == "Yes"  # the loopback's first allowed value
    assert JudgeConfiguration.objects.get().key == report.configuration
    # the usage the loopback reported, line by line: the good line at the batch price, the retry at the direct one
    chat = [r.body for r in loopback.requests if r.endpoint == "chat"]
    good_line = next(b for b in chat[:2] if POOR not in str(b["messages"]))
    answer = json.dumps(example_for(good_line["response_format"]["json_schema"]["schema"]))

    def usage_of(body):
        return Usage(input_tokens=LoopbackLLMServer._input_tokens(body), output_tokens=len(answer) // 4, calls=1)

    assert Usage.from_dict(batch.usage) == usage_of(good_line) + usage_of(chat[2])
    expected = estimate_cost("gpt-5.2", usage_of(good_line), batch=True) + estimate_cost("gpt-5.2", usage_of(chat[2]))
    assert batch.cost_usd == pytest.approx(expected) and report.cost_usd == pytest.approx(expected)


@pytest.mark.django_db
def test_a_line_that_fails_in_the_batch_and_again_directly_is_counted_and_the_command_fails(loopback, desk, capsys):
    import_set()

    def refuse_poor(endpoint, body, n):
        if POOR in str(body.get("messages")):
            return Reply(status=400, error_message="refused for the test")
        return default_responder(endpoint, body, n)

    loopback.responder = refuse_poor
    with pytest.raises(CommandError, match=r"1 call\(s\) failed; the others are stored"):
        call_command(
            "judge_imported", "--rubric", "tutor-response", "--provider", f"openai/gpt-5.2@{loopback.openai_url}",
            "--batch",
        )  # fmt: skip
    err = capsys.readouterr().err
    assert f"item {Item.objects.get(key='poor').pk} repeat 1: HTTP 400: refused for the test; direct call:" in err
    batch = ProviderBatch.objects.get()
    assert (batch.state, batch.failed, batch.retried, batch.lost) == ("applied", 1, 0, 1)
    assert "refused for the test" in batch.error
    assert {key for key, _, _ in scores()} == {"good"}
    # run again: only the missing item is sent, in a new batch
    loopback.responder = default_responder
    call_command(
        "judge_imported", "--rubric", "tutor-response", "--provider", f"openai/gpt-5.2@{loopback.openai_url}",
        "--batch",
    )  # fmt: skip
    assert desk.creates == 2
    assert ProviderBatch.objects.order_by("-pk").first().custom_ids == {
        custom_id("poor"): [Item.objects.get(key="poor").pk, 1]
    }
    assert {key for key, _, _ in scores()} == {"good", "poor"}


@pytest.mark.django_db
def test_the_llm_config_option_sends_anthropic_message_batches_without_a_flag(loopback, desk):
    import_set()
    LLMConfig.objects.create(
        role="rubric_judge",
        provider="anthropic",
        model="claude-opus-4-6",
        base_url=loopback.anthropic_url,
        options={"batch": True, "thinking_budget": 0},
    )
    seen = []
    report = services.transcripts_judge(rubric="tutor-response", on_progress=lambda k, n: seen.append((k, n)))
    assert (report.judged, report.failed, report.retried) == (2, (), 0) and report.batch.startswith("anthropic batch")
    assert desk.creates == 1 and seen == [(2, 2)]
    bodies = [r.body for r in loopback.requests if r.endpoint == "messages"]
    assert len(bodies) == 2 and not any(b.get("stream") for b in bodies)
    assert JudgeScore.objects.count() == 2 * DIMENSIONS
    # without the option the same config calls directly
    LLMConfig.objects.filter(role="rubric_judge").update(options={"thinking_budget": 0})
    services.transcripts_judge(rubric="tutor-response", only_missing=False)
    assert desk.creates == 1 and loopback.count("messages") == 4
    assert all(r.body.get("stream") for r in loopback.requests[2:])


def _judge_process(url: str, log) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_BATCH_POLL_SECONDS": "0.05",
        "OPENAI_API_KEY": "sk-test-loopback",
    }
    command = [sys.executable, "manage.py", "judge_imported", "--rubric", "tutor-response", "--batch"]
    return subprocess.Popen(
        [*command, "--provider", f"openai/gpt-5.2@{url}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@pytest.mark.django_db(transaction=True)
def test_a_process_killed_while_it_waits_is_resumed_by_the_next_without_a_second_batch(loopback, desk, tmp_path):
    import_set()
    desk.polls_to_end = 10**6  # the batch stays in progress until the test lets it end
    with (tmp_path / "first.log").open("wb") as log:
        first = _judge_process(loopback.openai_url, log)
        deadline = time.monotonic() + 60
        while desk.polls < 3:
            assert first.poll() is None, (tmp_path / "first.log").read_text()
            assert time.monotonic() < deadline, "the command never polled its batch"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
    waiting = ProviderBatch.objects.get()
    assert waiting.state == BatchState.WAITING and waiting.provider_batch_id.startswith("batch_")
    assert JudgeScore.objects.count() == 0 and desk.creates == 1 and loopback.count("chat") == 2

    desk.polls_to_end = 0  # the next poll finds it ended
    with (tmp_path / "second.log").open("wb") as log:
        second = _judge_process(loopback.openai_url, log)
        assert second.wait(120) == 0, (tmp_path / "second.log").read_text()
    out = (tmp_path / "second.log").read_text()
    assert f"2 judged, 0 already judged; by openai batch {waiting.provider_batch_id}, resumed" in out
    assert desk.creates == 1 and loopback.count("chat") == 2  # one batch, each line answered once, no direct call
    assert ProviderBatch.objects.get().state == BatchState.APPLIED
    assert JudgeScore.objects.count() == 2 * DIMENSIONS  # stored once

    # a third run finds everything judged and sends nothing
    with (tmp_path / "third.log").open("wb") as log:
        third = _judge_process(loopback.openai_url, log)
        assert third.wait(120) == 0
    assert "0 judged, 2 already judged" in (tmp_path / "third.log").read_text()
    assert desk.creates == 1 and ProviderBatch.objects.count() == 1


def test_finished_runs_rejudged_by_one_batch_wait_on_it_and_each_takes_its_own_answer(server, loopback, desk):
    """Two finished tutor runs re-judged by batch: one batch of two lines; a run shows the stage text while it
    waits; the other run takes its answer from the stored batch; each run pays for its own line."""
    import threading

    from evaluation.models import EvaluationRun
    from evaluation.tutoring import services as tutoring
    from tests.tutoring.test_pipeline import JUDGE, TOPIC, cli, scripted

    loopback.responder = scripted(JUDGE)
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    cli(persona="average_student", provider=provider, topic_id=TOPIC, max_turns=2, seed=4, runs_per_persona=2)
    runs = list(EvaluationRun.objects.order_by("run_id"))
    assert [r.status for r in runs] == ["completed", "completed"]
    before = {r.run_id: r.token_usage["by_role"]["judge"]["calls"] for r in runs}
    loopback.reset()
    loopback.responder = scripted(dict(JUDGE, summary="Judged by batch."))
    desk.polls_to_end = 10**6

    out = StringIO()
    call_command("judge_runs", "--batch", *[f"--run={r.run_id}" for r in runs], stdout=out)
    assert "openai batch for 2 run(s) stored" in out.getvalue()
    stored = ProviderBatch.objects.get()
    assert stored.kind == "run_judge" and sorted(stored.custom_ids) == [r.run_id for r in runs]
    leader, follower = (EvaluationRun.objects.get(pk=r.pk) for r in runs)
    assert leader.status == "queued" and leader.queue_action == "batch_eval"

    worker = threading.Thread(target=tutoring.run_execute, args=(leader.pk, leader.attempt, "batch_eval"))
    worker.start()
    deadline = time.monotonic() + 60
    while "waiting on the provider's batch (0/2 done)" not in EvaluationRun.objects.get(pk=leader.pk).detail:
        assert time.monotonic() < deadline and worker.is_alive(), "the run never showed the batch it waits on"
        time.sleep(0.05)
    assert EvaluationRun.objects.get(pk=leader.pk).stage == "evaluating"
    desk.polls_to_end = 0
    worker.join(60)
    tutoring.run_execute(follower.pk, follower.attempt, "batch_eval")

    assert desk.creates == 1 and loopback.count("chat") == 2  # one batch, one line a run, nothing direct
    stored.refresh_from_db()
    assert stored.state == BatchState.APPLIED and set(stored.results) == {r.run_id for r in runs}
    for run in runs:
        run.refresh_from_db()
        assert run.status == "completed", run.error
        assert run.summary == "Judged by batch." and run.overall_score == 5.0
        assert run.messages.count() > 0 and run.token_usage["by_role"]["judge"]["calls"] == before[run.run_id] + 1


@pytest.mark.django_db
def test_drift_scoring_by_batch_sends_each_judge_call_once_in_one_batch_and_scores_as_directly(
    catalog, loopback, desk, settings
):
    from pathlib import Path

    from evaluation.drift import services as drift
    from evaluation.drift.harness import ensure_cast_messages
    from evaluation.models import Agent, DimensionScore, EvaluationRun
    from tests.drift.test_comparability import scores as judge_scores

    ensure_cast_messages(Path(settings.EVALUATION["CAST_DIR"]) / "messages.jsonl")
    loopback.responder = judge_scores(6)
    agent = Agent.objects.get(pk="rex")
    judge = f"openai/gpt-5.2@{loopback.openai_url}"
    direct = drift.drift_evaluate(agent=agent, judge=judge, source="cast")
    calls = loopback.count("chat")
    assert direct.status == "completed" and calls > 1 and desk.creates == 0

    by_batch = drift.drift_evaluate(agent=agent, judge=judge, source="cast", batch=True)
    assert by_batch.status == "completed", by_batch.error
    assert desk.creates == 1 and loopback.count("chat") == 2 * calls  # every call once, all of them in the batch
    stored = ProviderBatch.objects.get()
    assert (stored.kind, stored.total, stored.run_id, stored.retried) == ("drift_scores", calls, by_batch.run_id, 0)

    def scored(run: EvaluationRun) -> dict[str, float]:
        return dict(DimensionScore.objects.filter(run=run).values_list("dimension", "score"))

    assert scored(by_batch) == scored(direct) and scored(direct)
    judge_usage = by_batch.token_usage["by_role"]["proposition_judge"]
    direct_usage = direct.token_usage["by_role"]["proposition_judge"]
    # the same calls and tokens (the loopback serves the repeated prefix from its prompt cache the second time:
    # read then, written the first time)
    cache_counts = ("cached_input_tokens", "cache_write_tokens")
    assert {k: v for k, v in judge_usage.items() if k not in cache_counts} == {
        k: v for k, v in direct_usage.items() if k not in cache_counts
    }
    assert by_batch.cost_usd == pytest.approx(estimate_cost("gpt-5.2", Usage.from_dict(judge_usage), batch=True))


@pytest.mark.django_db(transaction=True)
def test_a_batch_sent_without_waiting_is_finished_by_the_workers_polling_task(loopback, desk, capsys):
    from django_q.models import Schedule

    from evaluation.tasks import batch_poll_task

    import_set()
    desk.polls_to_end = 2
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", provider, "--batch", "--no-wait")
    out = capsys.readouterr().out
    stored = ProviderBatch.objects.get()
    assert f"0 judged, 0 already judged; by openai batch {stored.provider_batch_id} (waiting: waiting on" in out
    assert stored.state == BatchState.WAITING and JudgeScore.objects.count() == 0
    poll = Schedule.objects.get(func="evaluation.tasks.batch_poll_task")
    assert (poll.args, poll.schedule_type) == (str(stored.pk), Schedule.ONCE)

    assert batch_poll_task(stored.pk) == "waiting on the provider's batch (1/2 done)"  # still in progress
    assert Schedule.objects.filter(func="evaluation.tasks.batch_poll_task").count() == 2  # polled again later
    done = batch_poll_task(stored.pk)
    assert "2 judged" in done and f"by openai batch {stored.provider_batch_id}, resumed" in done
    assert JudgeScore.objects.count() == 2 * DIMENSIONS and desk.creates == 1
    assert batch_poll_task(stored.pk) == "applied"  # a late copy of the task stores nothing twice
    assert JudgeScore.objects.count() == 2 * DIMENSIONS


@pytest.mark.django_db
def test_judge_runs_names_what_is_wrong_with_its_input():
    with pytest.raises(CommandError, match="name runs with --run RUN_ID or --group GROUP"):
        call_command("judge_runs", "--batch")
    with pytest.raises(CommandError, match="no run run_nope"):
        call_command("judge_runs", "--batch", "--run", "run_nope")
    with pytest.raises(CommandError, match="run: no run 'run_nope'"):
        call_command("judge_runs", "--run", "run_nope")
    assert not ProviderBatch.objects.exists()


@pytest.mark.django_db
def test_the_canary_is_rejudged_by_batch_and_the_admin_lists_the_batch_with_its_progress(staff_client):
    import_set()
    services.canary_set(name="canary", rubric="tutor-response", item_ids=[Item.objects.get(key="good").pk])
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", "offline", "--canary-only", "--batch")
    stored = ProviderBatch.objects.get()
    assert list(stored.custom_ids) == [custom_id("good")] and stored.state == BatchState.APPLIED
    assert {key for key, _, _ in scores()} == {"good"}
    ProviderBatch.objects.filter(pk=stored.pk).update(state=BatchState.WAITING, done=0)
    page = staff_client.get("/admin/evaluation/providerbatch/").content.decode()
    assert "waiting on the provider&#x27;s batch (0/1 done)" in page


@pytest.mark.django_db(transaction=True)
def test_a_failed_poll_keeps_the_batch_polled_and_the_sweep_repolls_an_orphaned_batch(loopback, desk):
    import socket
    from datetime import timedelta

    from django.utils import timezone
    from django_q.models import Schedule

    from evaluation.tasks import batch_poll_task, runs_sweep_task

    import_set()
    desk.polls_to_end = 2
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    call_command("judge_imported", "--rubric", "tutor-response", "--provider", provider, "--batch", "--no-wait")
    stored = ProviderBatch.objects.get()
    polls = Schedule.objects.filter(func="evaluation.tasks.batch_poll_task")
    polls.delete()

    # The vendor cannot be reached for one poll: the batch stays waiting and its next poll is scheduled.
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}/v1"
    ProviderBatch.objects.filter(pk=stored.pk).update(base_url=dead)
    answer = batch_poll_task(stored.pk)
    assert answer.startswith("poll failed, polling again later: "), answer
    stored.refresh_from_db()
    assert stored.state == BatchState.WAITING and polls.count() == 1

    # Its poll lost (a worker killed mid-poll): the sweep schedules one once the batch has been quiet a while.
    polls.delete()
    ProviderBatch.objects.filter(pk=stored.pk).update(base_url=loopback.openai_url)
    runs_sweep_task()
    assert polls.count() == 0  # polled a moment ago: not an orphan yet
    ProviderBatch.objects.filter(pk=stored.pk).update(updated_at=timezone.now() - timedelta(minutes=10))
    runs_sweep_task()
    assert list(polls.values_list("args", flat=True)) == [str(stored.pk)]
    runs_sweep_task()
    assert polls.count() == 1  # one poll to come is enough

    for _ in range(3):
        if "judged" in (answer := batch_poll_task(stored.pk)):
            break
    assert "2 judged" in answer and JudgeScore.objects.count() == 2 * DIMENSIONS and desk.creates == 1


@pytest.mark.django_db
def test_runs_at_their_cost_limit_are_not_rejudged_by_batch_and_nothing_is_sent(catalog, loopback, desk):
    from evaluation.models import EvaluationRun
    from tests.web.test_pages import make_runs

    spent, fresh = make_runs(2)
    EvaluationRun.objects.filter(pk=spent.pk).update(cost_usd=0.5, cost_limit_usd=0.5)
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    EvaluationRun.objects.update(config={"provider": provider})
    with pytest.raises(
        CommandError, match=rf"cost limit reached, nothing sent: {spent.run_id} \(\$0.5000 of \$0.5000\)"
    ):
        call_command("judge_runs", "--batch", f"--run={spent.run_id}", f"--run={fresh.run_id}", stdout=StringIO())
    assert ProviderBatch.objects.count() == 0 and desk.creates == 0 and loopback.count() == 0
    assert EvaluationRun.objects.get(pk=fresh.pk).status == "completed"  # nothing queued either
