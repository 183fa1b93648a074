"""The batch APIs on the loopback server: OpenAI's (files, batches, output file) and Anthropic's Message
Batches. Each request in a batch is answered as the matching single endpoint would answer it."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluation.providers.loopback import LoopbackLLMServer


def install(server: "LoopbackLLMServer") -> None:
    """Add the batch endpoints to server.routes."""
