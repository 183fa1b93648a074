"""The loopback LLM server as a process of its own, for the benchmarks: prints its URL, answers
`count` on stdin with the number of calls it has served, and stops when stdin closes.

    python bench/fake_llm.py --latency 0.1
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluation.providers.loopback import LoopbackLLMServer  # noqa: E402  (no Django needed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each call waits before answering")
    args = parser.parse_args()
    server = LoopbackLLMServer(latency=args.latency).start()
    print(server.url, flush=True)
    for line in sys.stdin:
        if line.strip() == "count":
            print(server.count(), flush=True)
    server.stop()


if __name__ == "__main__":
    main()
