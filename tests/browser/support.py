"""Helpers for the real-browser tests: a real ``streamlit run`` server on a free port and
Playwright waits and clicks. Test modules import them from here; conftest.py holds the fixture."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from playwright.sync_api import Browser, Page

from faillab.app.auth import IDENTITY_COOKIE
from faillab.app.first_screen import FIRST_SCREEN_ID
from faillab_core.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from tests.support import REPO, wait_for_health
from trajectories.workspace import Workspace

CHROMIUM = os.environ.get("FAILLAB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts" / "screenshots"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               "--disable-dev-shm-usage"]


#: A server in local mode on the workspace's own SQLite store: a typed name signs in.
LOCAL_MODE = {"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""}


def demo_with_people(demo_workspace: Path, folder: Path, people: Mapping[str, str]
                     ) -> tuple[Path, Store]:
    """A copy of the demo workspace in ``folder`` and its store, with ``people`` (name -> role)
    added: what a test changes stays in its copy."""
    root = folder / "ws"
    shutil.copytree(demo_workspace, root)
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    for name, role in people.items():
        store.users.add(name, role)
    return root, store


def failed_ids(root: Path, n: int) -> list[str]:
    """The first ``n`` failures of the workspace, in the queue's order."""
    return [str(t) for t in failed_frame(Workspace(root))["id"].iloc[:n]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class StreamlitServer:
    def __init__(self, workspace: Path, env: dict[str, str] | None = None) -> None:
        self.workspace = workspace
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log = workspace.parent / f"streamlit-{self.port}.log"
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            # Started as ``faillab serve`` starts it (metrics closed, the first screen added).
            [sys.executable, "-m", "faillab.app.serve", "run", str(REPO / "app" / "main.py"),
             "--server.port", str(self.port), "--server.headless", "true",
             "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
            cwd=REPO, env={**os.environ, "FAILLAB_WORKSPACE": str(workspace), **(env or {})},
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        wait_for_health(self.url, self.proc, log, 60)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


def wait_idle(page: Page, timeout_ms: int = 30_000) -> None:
    """Wait until the app is connected, its script run has finished and the server-drawn first
    screen of a trajectory link is gone. The first screen repeats the page's text until the page
    has drawn its own steps, so a test reading the page before then would find every line twice;
    and on a loaded machine the front end can report "not running" before the first run starts."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    page.wait_for_selector(f"#{FIRST_SCREEN_ID}", state="detached", timeout=timeout_ms)
    page.wait_for_timeout(150)  # let a rerun triggered by the last action begin
    page.wait_for_function(
        """() => {
            const app = document.querySelector("[data-testid='stApp']");
            return app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
                && app.getAttribute('data-test-script-state') === 'notRunning';
        }""",
        timeout=timeout_ms,
    )
    page.wait_for_timeout(200)


def screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def click_grid_row(page: Page, row: int = 0, grid_index: int = 0) -> None:
    """Select a row of a st.dataframe (a canvas grid) by clicking its row-marker cell."""
    grid = page.locator("[data-testid='stDataFrame']").nth(grid_index)
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    assert box is not None
    header, row_height = 35, 35
    page.mouse.click(box["x"] + 18, box["y"] + header + row_height * row + row_height / 2)


# Text of a control (a widget's label, a button, a metric's label) cut short on screen: its
# box is narrower than its text, so the reader sees "Re…" or a clipped word.
_CUT_CONTROLS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const parts = main.querySelectorAll(
      "[data-testid='stWidgetLabel'], [data-testid='stWidgetLabel'] *, button, button *, "
      + "[data-testid='stMetricLabel'], [data-testid='stMetricLabel'] *");
  return [...parts].filter((el) => el.offsetParent !== null && el.clientWidth > 0
                           && el.scrollWidth > el.clientWidth + 1)
                   .map((el) => el.innerText.trim()).filter((text) => text);
}"""


def cut_controls(page: Page) -> list[str]:
    """Labels, buttons and metric labels in the main area whose text does not fit its box."""
    return list(page.evaluate(_CUT_CONTROLS))


def local_sign_in(browser: Browser, server: StreamlitServer, name: str, path: str,
                  viewport: dict[str, int]) -> Page:
    """A new browser context at ``path``, signed in by name (local mode's "Your name")."""
    page = browser.new_context(viewport=viewport).new_page()  # type: ignore[arg-type]
    page.goto(f"{server.url}/{path}")
    wait_idle(page)
    field = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
    field.fill(name)
    field.press("Enter")
    wait_idle(page)
    # The name is remembered by a cookie a small script on the page writes after the run; a
    # test that goes to another page before the script has run would be asked for the name
    # again (on a loaded machine the script can come seconds after the page looks idle).
    deadline = time.monotonic() + 60
    while not any(c["name"] == IDENTITY_COOKIE for c in page.context.cookies()):
        if time.monotonic() > deadline:
            raise AssertionError(f"signed in as {name!r}, but no identity cookie after 60 s")
        page.wait_for_timeout(200)
    return page
