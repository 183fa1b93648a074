"""A real language model in the loop: llama.cpp's llama-server serving Gemma 3 270M (bin/local-model), reached
through the normal paths, a tutoring run from the CLI and a judging job on imported items.

The model is a small base checkpoint: it does not follow instructions, so these tests check the plumbing
(calls made, transcript stored, failures named, scores only where the reply was valid), never the quality
of what it says. They need `bin/local-model install` (LLAMA_SERVER and LOCAL_MODEL_GGUF
set)."""

import json
import os
import signal
import subprocess
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvaluationRun, JudgeConfiguration, JudgeScore, LLMConfig
from evaluation.providers import Message, ProviderSpec, get_llm
from evaluation.providers.compat import plumbing_only

ROOT = Path(__file__).resolve().parents[1]
MODEL = "gemma-3-270m-q4_k_m"
LLAMA_SERVER = os.environ.get("LLAMA_SERVER", "")

pytestmark = [
    pytest.mark.skipif(
        not LLAMA_SERVER,
        reason="no local model: run bin/local-model install and set LLAMA_SERVER and LOCAL_MODEL_GGUF "
        '(eval "$(bin/local-model install)")',
    ),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(scope="module")
def local_model():
    """llama-server with the model, on 127.0.0.1 and a free port, started by bin/local-model (from the cache)."""
    assert Path(LLAMA_SERVER).exists() and Path(os.environ["LOCAL_MODEL_GGUF"]).exists(), "bin/local-model install"
    started = subprocess.run(
        [str(ROOT / "bin" / "local-model"), "start"], capture_output=True, text=True, timeout=300, check=False
    )
    assert started.returncode == 0, started.stderr
    env = dict(line.split("=", 1) for line in started.stdout.split())
    yield env["EVAL_LOCAL_MODEL_URL"]
    os.kill(int(env["LOCAL_MODEL_PID"]), signal.SIGTERM)


@pytest.fixture(autouse=True)
def real_timeouts(settings):
    """A timeout that bounds a failure, not a race, and the project's retries (the suite's 2 s would fail a real
    model on a busy machine; at 120 s a reply of 400 tokens timed out twice at load 10 on 2 cores, beside the
    site crawl). An answer usually takes 5-60 s."""
    settings.EVALUATION = {**settings.EVALUATION, "LLM_TIMEOUT_SECONDS": 600.0, "LLM_MAX_ATTEMPTS": 2}


def configure(role: str, url: str, **options):
    LLMConfig.objects.update_or_create(
        role=role, defaults={"provider": "openai", "model": MODEL, "base_url": url, "options": options}
    )


def test_the_endpoint_as_it_is_strict_roles_measured_speed(local_model):
    """The server refuses roles out of order (Gemma's turn format) and the provider adapts; its speed is measured."""
    llm = get_llm("tutor", override=ProviderSpec("openai", MODEL, local_model, {"max_tokens": 24}))
    result = llm.call(
        [Message("system", "You are a tutor."), Message("assistant", "Hi! What is 3 + 4?"), Message("user", "7")],
        directive="Say whether the answer is right.",
    )
    assert result.usage.calls == 1 and result.usage.output_tokens > 0 and result.text.strip()
    traits = llm.provider.traits
    assert traits.alternate_roles  # learned from the server's refusal
    assert traits.speed is not None and traits.speed.output > 1.0


def test_a_tutoring_run_with_the_model_as_student_and_tutor(local_model, server, settings):
    """The CLI's run: the simulator (this process) and the reference tutor (the app under uvicorn) both call
    the model; the offline judge scores the conversation. Every turn is stored, or the run fails saying why."""
    configure("simulator", local_model, max_tokens=40)
    configure("tutor", local_model, max_tokens=80)
    out, started = StringIO(), time.monotonic()
    try:
        call_command(
            "run_evaluation",
            persona="ace",
            topic_id="two-digit-addition-regrouping",
            max_turns=3,
            seed=3,
            turn_timeout=300,
            stdout=out,
        )
    except CommandError:
        pass  # a failed run is checked below: it must say why
    seconds = time.monotonic() - started
    run = EvaluationRun.objects.get()
    student = list(run.messages.filter(role="student").values_list("content", flat=True))
    tutor = list(run.messages.filter(role="tutor").values_list("content", flat=True))
    print(f"tutoring run {run.run_id}: {run.status} in {seconds:.1f} s; {len(tutor)} tutor, {len(student)} student")
    for who, text in run.messages.order_by("pk").values_list("role", "content"):
        print(f"  {who}: {text[:160]!r}")
    if run.status == "completed":
        assert tutor and student and all(m.strip() for m in student)
        usage = run.config.get("usage") or {}
        assert run.dimension_scores.count() == 5, usage
    else:
        assert run.status == "failed" and run.error.strip(), run.status
        assert tutor, "the tutor's opening came from the model before anything failed"
        print(f"  failed: {run.error}")
    folder = Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id
    assert (folder / "run.log").exists()


def test_a_judging_job_on_imported_items(local_model, capsys):
    """judge_imported with the model as the rubric judge: each call made; an item's scores stored only when
    its reply was valid (as it came, or repaired, and counted); every other call a named failure."""
    from tests.judging.test_judge import import_set

    import_set()
    configure("rubric_judge", local_model, max_tokens=400, endpoint_name="gemma-local")
    try:
        # one repeat: each call takes the model's two cores for up to a minute on a busy machine (two repeats
        # took 400 s of the SQLite pass), and repeats go through the same path (tests/judging cover them)
        call_command("judge_imported", "--rubric", "tutor-response", "--repeats", "1", "--workers", "1")
    except CommandError as exc:
        assert "call(s) failed; the others are stored" in str(exc)
    out, err = capsys.readouterr()
    print(out, err)
    configuration = JudgeConfiguration.objects.get()
    assert configuration.key.startswith(f"openai/{MODEL}@gemma-local | prompt ")
    assert "no measurement of quality" in out and plumbing_only(configuration.key)
    line = next(line for line in out.splitlines() if line.startswith("Judged "))
    judged = int(line.split(": ", 1)[1].split(" judged")[0])
    failed = [f for f in err.splitlines() if f.startswith("failed: ")]
    assert judged + len(failed) == 2  # 2 items x 1 repeat: each stored or named
    assert all("InvalidJSONError" in f or "ProviderError" in f or "not on the scale" in f for f in failed), failed
    scores = JudgeScore.objects.filter(configuration=configuration)
    dimensions = 8
    assert scores.count() == judged * dimensions
    assert all(s.value for s in scores)
    summary = {"judged": judged, "failed": len(failed), "line": line}
    print(json.dumps(summary))
