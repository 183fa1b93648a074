"""The API's JSON parser: the same checks as every other JSON door (evaluation/limits.py json_loads)."""

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from evaluation import limits
from evaluation.errors import InvalidInput


class JSONParser(parsers.JSONParser):
    """DRF's JSONParser, refusing with 400 naming the field what no column can hold: a NUL, a lone surrogate
    (`\\udfff`), an integer longer than Python converts, NaN or Infinity; JSON nested deeper than
    JSON_MAX_DEPTH before parsing it; and with 413 a body over DATA_UPLOAD_MAX_MEMORY_SIZE, reading no more."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        most = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        data = b"" if stream is None else stream.read() if most is None else stream.read(most + 1)
        if most is not None and len(data) > most:
            raise RequestDataTooBig("the request body is too large")
        try:
            return limits.json_loads(data, where="")
        except InvalidInput as exc:
            if exc.problems and exc.problems[0].reason.startswith("invalid JSON"):
                raise ParseError(f"JSON parse error - {exc}") from None
            raise
