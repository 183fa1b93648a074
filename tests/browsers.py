"""One Chromium for a test module: Playwright's sync API driving Debian's Chromium, launched once."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium (a playwright Browser) for as long as the block lasts; each test opens a context of
    its own in it. Playwright's sync API keeps an event loop in this thread meanwhile, which Django takes
    for async code, so the block allows the ORM's synchronous calls (DJANGO_ALLOW_ASYNC_UNSAFE) until it
    ends: the set-up and teardown of the tests inside (catalogue, flush) included."""
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
