"""Browser fixtures for judging's page tests: one Chromium per test module."""

from tests.web.conftest import module_chromium as module_chromium  # noqa: F401
