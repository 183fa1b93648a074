"""The provider layer's own overhead per call, against the loopback server with zero latency.

For each vendor it times N calls made with the bare SDK and N made through get_llm(...).call(),
and prints both and their difference (what our retries, limits, JSON handling and accounting cost).

    python bench/providers_overhead.py [--calls 300]
"""

import argparse
import os
import statistics
import time

from _django import setup, summary

setup()

import anthropic  # noqa: E402
import openai  # noqa: E402

from evaluation.providers import Message, Meter, ProviderSpec, get_llm  # noqa: E402
from evaluation.providers.loopback import LoopbackLLMServer  # noqa: E402

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def timed(fn, n: int) -> list[float]:
    for _ in range(10):  # warm the connection pool
        fn()
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench")
    messages = [Message("system", "You grade."), Message("user", "Is 2+2=4?")]
    raw_messages = [{"role": m.role, "content": m.content} for m in messages]
    with LoopbackLLMServer() as server:
        oa = openai.OpenAI(base_url=server.openai_url, max_retries=0)
        an = anthropic.Anthropic(base_url=server.anthropic_url, max_retries=0)

        def raw_anthropic():
            with an.messages.stream(model="m", max_tokens=100, system="You grade.", messages=raw_messages[1:]) as s:
                s.get_final_message()

        cases = [
            (
                "openai responses",
                lambda: oa.responses.create(model="m", input=raw_messages, max_output_tokens=100),
                ProviderSpec("openai", "m", server.openai_url, {"api": "responses"}),
            ),
            (
                "openai chat",
                lambda: oa.chat.completions.create(model="m", messages=raw_messages, max_tokens=100),
                ProviderSpec("openai", "m", server.openai_url, {"api": "chat"}),
            ),
            ("anthropic stream", raw_anthropic, ProviderSpec("anthropic", "m", server.anthropic_url)),
        ]
        print(f"Provider-layer overhead, loopback server, zero latency, {args.calls} calls each\n")
        for label, raw_call, spec in cases:
            llm = get_llm("tutor", override=spec, meter=Meter())
            raw = timed(raw_call, args.calls)
            ours = timed(lambda llm=llm: llm.call(messages), args.calls)
            ours_json = timed(lambda llm=llm: llm.call(messages, schema=SCHEMA), args.calls)
            print(summary(f"{label}: bare SDK", raw))
            print(summary(f"{label}: through get_llm", ours))
            print(summary(f"{label}: get_llm + JSON", ours_json))
            print(
                f"{label}: layer overhead median {statistics.median(ours) - statistics.median(raw):+.3f} ms, "
                f"with JSON parse+validate {statistics.median(ours_json) - statistics.median(raw):+.3f} ms\n"
            )
        offline = get_llm("tutor", override="offline")
        print(summary("offline provider (no HTTP)", timed(lambda: offline.call(messages), args.calls)))


if __name__ == "__main__":
    main()
