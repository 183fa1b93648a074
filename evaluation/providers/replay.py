"""Record and replay: answers from recorded calls, keyed by a fingerprint of the request.

A recording is one JSON file per request under the recordings folder. The fingerprint covers
what changes the output (model, messages, output-relevant settings, schema) and nothing that
does not (retries, timeouts). A miss is an error naming the role and fingerprint, never a fallback.
"""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evaluation.providers.base import Completion, Provider, ReplayMiss, Request, ToolCall, Usage


def recording_path(folder: Path, role: str, key: str) -> Path:
    return folder / role / f"{key}.json"


def record(folder: Path, request: Request, completion: Completion, provider: str) -> Path:
    """Write one recording (atomically, so concurrent workers never see half a file)."""
    key = request.fingerprint()
    path = recording_path(folder, request.role, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "fingerprint": key,
        "role": request.role,
        "provider": provider,
        "model": request.model,
        "request": {"messages": [asdict(m) for m in request.messages], "settings": asdict(request.settings)},
        "completion": {
            "text": completion.text,
            "model": completion.model,
            "usage": completion.usage.as_dict(),
            "tool_calls": [asdict(c) for c in completion.tool_calls],
        },
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    tmp.replace(path)
    return path


class ReplayProvider(Provider):
    name = "replay"
    default_model = ""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        from evaluation.conf import setting

        self.folder = Path(self.options.get("dir") or setting("RECORDINGS_DIR"))

    def generate(self, request: Request) -> Completion:
        key = request.fingerprint()
        path = recording_path(self.folder, request.role, key)
        if not path.is_file():
            raise ReplayMiss(
                f"replay: no recording for role {request.role!r}, fingerprint {key} (model {request.model!r}) "
                f"under {self.folder}; the request differs from every recorded one"
            )
        doc = json.loads(path.read_text())["completion"]
        calls = [ToolCall(**c) for c in doc.get("tool_calls", [])]
        return Completion(text=doc["text"], model=doc["model"], usage=Usage.from_dict(doc["usage"]), tool_calls=calls)
