"""Error reports (the DEBUG page, error e-mails) that never show a credential.

Django hides settings whose *name* looks secret. Connection URLs carry their password in the *value*
(``REDIS_URL`` is also copied into ``Q_CLUSTER["redis"]`` and the channel layer's host list), and a
connection error often quotes the URL it could not reach, so the user-info part of any URL is masked
wherever it appears: in settings, request metadata, frame variables and the finished report.
"""

import re
from typing import Any

from django.utils.functional import LazyObject
from django.utils.safestring import SafeString, mark_safe
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

# scheme://user:password@host -> scheme://********@host (user-info cannot contain "/", quotes or space).
_URL_USER_INFO = re.compile(r"(\b[a-z][a-z0-9+.\-]*://)[^/\s@'\"<>]+@", re.IGNORECASE)


def hide_url_credentials(text: str) -> str:
    """text with the user name and password of every URL in it replaced by stars."""
    return _URL_USER_INFO.sub(r"\1********@", text)


def _hide_in_string(value: Any) -> Any:
    # A lazy object claims to be a str but is not one to re.sub (and evaluating it could fail).
    if isinstance(value, str) and not isinstance(value, LazyObject):
        return hide_url_credentials(value)
    return value


class CredentialHidingFilter(SafeExceptionReporterFilter):
    """Django's filter, plus connection settings by name and credentials inside any URL value."""

    hidden_settings = re.compile(
        SafeExceptionReporterFilter.hidden_settings.pattern + "|CREDENTIAL|DSN|DATABASE_URL|REDIS|BROKER",
        flags=re.IGNORECASE,
    )

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)  # recurses into dicts, lists and tuples through here
        return _hide_in_string(cleansed)

    def cleanse_special_types(self, request: Any, value: Any) -> Any:
        cleansed = super().cleanse_special_types(request, value)  # frame variables
        return _hide_in_string(cleansed)


class CredentialHidingReporter(ExceptionReporter):
    """The last pass over the finished page: also covers exception messages and objects' reprs.
    Replacing characters with stars keeps escaped HTML escaped, so the page stays safe to render."""

    def get_traceback_html(self) -> SafeString:
        return mark_safe(hide_url_credentials(super().get_traceback_html()))

    def get_traceback_text(self) -> SafeString:
        return mark_safe(hide_url_credentials(super().get_traceback_text()))
