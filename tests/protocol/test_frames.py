"""The tutor socket's frames as text: JSON that any client's parser reads as the standard library wrote it."""

import asyncio
import json

from evaluation.protocol.ws import TutorSessionConsumer


def encoded(content):
    return asyncio.run(TutorSessionConsumer.encode_json(content))


def test_a_frame_reads_back_as_what_was_sent():
    frame = {
        "type": "assistant",
        "content": 'naïve "quotes", a \\ backslash, a\nnewline and 🙂',
        "turn": 3,
        "is_complete": False,
        "state": {"problem_index": 2, "tutor": {"seed": 2**53 - 1, "temperature": 0.7, "model": None}},
    }
    assert json.loads(encoded(frame)) == frame


def test_what_orjson_refuses_is_sent_as_the_standard_library_writes_it():
    # A lone surrogate (a model can write one as an escape in its JSON reply) and an int beyond 64 bits.
    for frame in ({"type": "assistant", "content": "half an emoji \ud83d"}, {"type": "state_update", "n": 2**70}):
        assert encoded(frame) == json.dumps(frame)
