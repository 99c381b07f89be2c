"""Debian's Chromium under Playwright, for the tests that open the pages in a real browser.

Playwright drives the system's ``chromium`` by ``executable_path`` (no browser download). Where there is none, a
browser test is skipped, unless WHILEAI_REQUIRE_CHROMIUM=1 (CI sets it): then it fails, so a CI image without the
browser cannot pass by skipping.

    pytestmark = needs_chromium             # a module of browser tests; the ``browser`` fixture is conftest's
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)
REQUIRED = os.environ.get("WHILEAI_REQUIRE_CHROMIUM") == "1"  # CI sets it: a missing browser fails, not skips
#: headless, and nothing a test did not ask for goes out on the network
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not REQUIRED,
                                    reason="no Chromium on this machine (apt-get install chromium)")


def require_chromium() -> str:
    """The browser's path; a test that reached here without one fails (CI requires it) or is skipped."""
    if CHROMIUM is None:
        if REQUIRED:
            pytest.fail("WHILEAI_REQUIRE_CHROMIUM=1 but no chromium is installed; apt-get install chromium")
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    return CHROMIUM


def launch_browser() -> Iterator[Any]:
    """One headless Chromium (conftest's module-scoped ``browser`` fixture yields it)."""
    from playwright.sync_api import sync_playwright

    path = require_chromium()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=FLAGS)
        yield b
        b.close()


def page_opener(browser: Any, link: Callable[[str], str], *, dialogs: bool = False) -> tuple[Callable[..., Any],
                                                                                               Callable[[], None]]:
    """``(make, close)``: ``make(path, width=1280)`` opens ``link(path)`` (a sign-in link that lands on ``path``)
    in a fresh context and waits for the page's heading; every page error, console error (and, with ``dialogs``,
    dialog) is kept, and ``close()`` closes the contexts and asserts there were none."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(path: str, width: int = 1280) -> Any:
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        ctx.set_default_timeout(15_000)
        contexts.append(ctx)
        page = ctx.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        if dialogs:
            page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.goto(link(path))
        page.wait_for_selector("main h1")
        return page

    def close() -> None:
        for ctx in contexts:
            ctx.close()
        assert not errors, errors

    return make, close
