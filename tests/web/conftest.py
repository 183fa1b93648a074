"""Browser fixtures for the page tests: one Chromium per test module."""

import pytest

from tests.browsers import chromium


@pytest.fixture(scope="module")
def module_chromium():
    """Chromium launched once for the module's tests (each opens contexts of its own and closes them)."""
    pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
    with chromium() as browser:
        yield browser
