"""Real-browser tests: a real ``streamlit run`` server on a free port, driven by Playwright
through Debian's chromium (no browser downloads exist on these machines)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.browser.support import CHROMIUM, LAUNCH_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Module scope: Playwright's sync API keeps an event loop running in this thread while it
    # is open, which would break later tests that call asyncio.run().
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM}: run 'make test' (it installs chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()
