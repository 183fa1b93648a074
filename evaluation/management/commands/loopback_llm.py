"""Serve the loopback LLM server (OpenAI and Anthropic wire formats) for drills and benchmarks."""

import time

from django.core.management.base import BaseCommand

from evaluation.providers.loopback import LoopbackLLMServer


class Command(BaseCommand):
    help = "Serve a fake LLM on 127.0.0.1 with chosen latency and fault rate (for fault drills and benchmarks)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--latency", type=float, default=0.0, help="Seconds added to every reply")
        parser.add_argument("--fault-rate", type=float, default=0.0, help="Share of replies that are 429/500/dropped")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **opts):
        server = LoopbackLLMServer(
            port=opts["port"], latency=opts["latency"], fault_rate=opts["fault_rate"], seed=opts["seed"]
        )
        server.start()
        self.stdout.write(
            f"Loopback LLM on {server.url}: OpenAI base_url {server.openai_url}, "
            f"Anthropic base_url {server.anthropic_url}. Ctrl-C stops it."
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.stop()
