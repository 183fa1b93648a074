"""Serve the loopback LLM server (OpenAI and Anthropic wire formats) for drills and benchmarks."""

import argparse
import time

from django.core.management.base import BaseCommand, CommandError

from evaluation.providers.loopback import LoopbackLLMServer


def _at_least_zero(text: str) -> float:
    value = float(text)
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _share(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a share between 0 and 1, got {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port between 0 and 65535 (0: any free port), got {text}")
    return value


class Command(BaseCommand):
    help = "Serve a fake LLM on 127.0.0.1 with chosen latency and fault rate (for fault drills and benchmarks)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=_port, default=8765, help="0: any free port (printed)")
        parser.add_argument("--latency", type=_at_least_zero, default=0.0, help="Seconds added to every reply")
        parser.add_argument(
            "--fault-rate", type=_share, default=0.0, help="Share of replies that are 429/500/dropped (0 to 1)"
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--rpm", type=_positive, default=None, help="Requests per minute; more are answered 429 with Retry-After"
        )
        parser.add_argument(
            "--tpm",
            type=_positive,
            default=None,
            help="Prompt tokens per minute; more are answered 429 with Retry-After",
        )

    def handle(self, *args, **opts):
        try:
            server = LoopbackLLMServer(
                port=opts["port"],
                latency=opts["latency"],
                fault_rate=opts["fault_rate"],
                seed=opts["seed"],
                rpm=opts["rpm"],
                tpm=opts["tpm"],
            ).start()
        except OSError as exc:
            raise CommandError(
                f"cannot listen on 127.0.0.1:{opts['port']}: {exc.strerror or exc}; "
                "another program holds the port: pass --port N, or --port 0 for a free one"
            ) from None
        self.stdout.write(
            f"Loopback LLM on {server.url}: OpenAI base_url {server.openai_url}, "
            f"Anthropic base_url {server.anthropic_url}."
            + (
                f" Rate limits per minute: {opts['rpm'] or 'any'} requests, {opts['tpm'] or 'any'} tokens."
                if opts["rpm"] or opts["tpm"]
                else ""
            )
            + " Ctrl-C stops it."
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.stop()
