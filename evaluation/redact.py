"""Credentials inside URLs (user:password@host) never leave in what a page, the API or a report shows."""

import logging
import re
from typing import Any

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def redact(value: Any) -> Any:
    """The value with every URL's user:password part replaced by '***' (strings, lists and dicts, deeply)."""
    if isinstance(value, str):
        return _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value


class RedactingFilter(logging.Filter):
    """Masks URL credentials in a log record's message and in its exception text, before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
