"""The provider layer's own cost per call, against the fake LLM at zero latency in its own process.

Variants: the bare SDKs, and the same calls through get_llm(...).call() (retries, limits, JSON
handling and accounting included): OpenAI's Responses API, chat completions for an OpenAI-
compatible base URL (over urllib3, and through the SDK), Anthropic's streamed Messages API, and the
offline provider. Each repeat runs every variant once, in a shuffled order, for --calls calls after
a warm-up that is not counted; figures are the median (min-max) over the repeats of this process's
CPU per call (the fake LLM's CPU is not in it) and of the wall time per call.

    python bench/providers_overhead.py [--calls 200] [--repeats 5]
"""

import argparse
import os
import random
import time
from collections.abc import Callable

from _django import setup
from _harness import fake_llm, load_average, spread

setup()

import anthropic  # noqa: E402
import openai  # noqa: E402

from evaluation.providers import Message, Meter, ProviderSpec, get_llm  # noqa: E402

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def per_call(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call of this process."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        fn()
    return (time.process_time() - cpu) / n * 1000, (time.perf_counter() - wall) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench")
    messages = [Message("system", "You grade."), Message("user", "Is 2+2=4?")]
    raw_messages = [{"role": m.role, "content": m.content} for m in messages]
    with fake_llm(0.0) as server:
        oa = openai.OpenAI(base_url=server.openai_url, max_retries=0)
        an = anthropic.Anthropic(base_url=server.anthropic_url, max_retries=0)

        def raw_anthropic() -> None:
            with an.messages.stream(model="m", max_tokens=100, system="You grade.", messages=raw_messages[1:]) as s:
                s.get_final_message()

        def ours(spec: ProviderSpec | str, **kwargs: object) -> Callable[[], object]:
            llm = get_llm("tutor", override=spec, meter=Meter())
            return lambda: llm.call(messages, **kwargs)

        responses = ProviderSpec("openai", "m", server.openai_url, {"api": "responses"})
        chat = ProviderSpec("openai", "m", server.openai_url, {"api": "chat"})
        chat_sdk = ProviderSpec("openai", "m", server.openai_url, {"api": "chat", "client": "sdk"})
        claude = ProviderSpec("anthropic", "m", server.anthropic_url)
        variants: dict[str, Callable[[], object]] = {
            "openai responses: bare SDK": lambda: oa.responses.create(
                model="m", input=raw_messages, max_output_tokens=100
            ),
            "openai responses: get_llm": ours(responses),
            "openai responses: get_llm + JSON": ours(responses, schema=SCHEMA),
            "openai chat: bare SDK": lambda: oa.chat.completions.create(
                model="m", messages=raw_messages, max_tokens=100
            ),
            "openai chat: get_llm (urllib3)": ours(chat),
            "openai chat: get_llm (urllib3) + JSON": ours(chat, schema=SCHEMA),
            "openai chat: get_llm (SDK)": ours(chat_sdk),
            "anthropic stream: bare SDK": raw_anthropic,
            "anthropic stream: get_llm": ours(claude),
            "anthropic stream: get_llm + JSON": ours(claude, schema=SCHEMA),
            "offline (no HTTP)": ours("offline"),
        }
        for fn in variants.values():  # warm-up: imports, connection pools, first-call caches
            per_call(fn, 20)
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        wall: dict[str, list[float]] = {name: [] for name in variants}
        order = list(variants)
        rng = random.Random(7)
        for _ in range(args.repeats):
            rng.shuffle(order)
            for name in order:
                c, w = per_call(variants[name], args.calls)
                cpu[name].append(c)
                wall[name].append(w)
    print(
        f"Provider layer per call, fake LLM at zero latency in its own process, {args.calls} calls x "
        f"{args.repeats} repeats, variants interleaved; {load_average()}\n"
    )
    print(f"{'variant':<38} {'CPU ms per call':<26} wall ms per call")
    for name in variants:
        print(f"{name:<38} {spread(cpu[name], '{:.3f}'):<26} {spread(wall[name], '{:.3f}')}")


if __name__ == "__main__":
    main()
