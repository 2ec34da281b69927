"""A trajectory link in a new browser shows its first screen from the server's HTML, before any
script runs, and gives way to the interactive page once that has drawn its steps; in password
mode only a live session gets it. A real server started as ``faillab serve`` starts it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from faillab.app.first_screen import FIRST_SCREEN_ID
from labeling.store import open_store
from tests.browser.support import StreamlitServer, wait_idle
from tests.support import make_trajectory
from trajectories.model import Step, StepKind, Task
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

QUESTION = "Which drug did patient 4711 receive first <b>after</b> surgery?"
NO_STEPS_QUESTION = "How many patients had a culture drawn on day one?"
VIEWPORT = {"width": 1280, "height": 800}


def _workspace(root: Path) -> str:
    steps = [Step(kind=StepKind.SQL, code=f"SELECT drug FROM prescriptions -- try {i}",
                  observation=f"[('drug-{i}',)]") for i in range(6)]
    traj = make_trajectory(task=Task(id="fs-1", question=QUESTION, ground_truth=[["aspirin"]],
                                     reference_sql="SELECT 1"),
                           steps=steps, final_answer=[["heparin"]]).with_id()
    # A results table's answer: no steps at all, only the final answer.
    answer_only = make_trajectory(task=Task(id="fs-2", question=NO_STEPS_QUESTION,
                                            ground_truth=[["3"]]),
                                  steps=[], final_answer="Four patients.").with_id()
    Workspace(root).add([(traj, None), (answer_only, None)])
    return str(traj.id)


def _answer_only_id(root: Path) -> str:
    return next(str(r["id"]) for r in Workspace(root).list() if r["task_id"] == "fs-2")


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StreamlitServer, str]]:
    root = tmp_path_factory.mktemp("first-screen") / "ws"
    traj_id = _workspace(root)
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, traj_id
    finally:
        server.stop()


def test_the_steps_show_without_any_script(browser: Browser,
                                           local_server: tuple[StreamlitServer, str]) -> None:
    server, traj_id = local_server
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)  # type: ignore[arg-type]
    try:
        page = context.new_page()
        page.goto(f"{server.url}/trajectory?id={traj_id}")
        first = page.locator(f"#{FIRST_SCREEN_ID}")
        expect(first).to_be_visible()
        # The question is text, as the page draws it: the <b> is shown, not obeyed.
        expect(first.get_by_text(QUESTION)).to_be_visible()
        expect(first.locator(".faillab-step")).to_have_count(6)
        expect(first.get_by_text("SELECT drug FROM prescriptions -- try 0")).to_be_in_viewport()
        expect(first.get_by_text("Final answer vs ground truth")).to_be_in_viewport()
    finally:
        context.close()


def test_the_interactive_page_takes_over(browser: Browser,
                                         local_server: tuple[StreamlitServer, str]) -> None:
    server, traj_id = local_server
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    try:
        page = context.new_page()
        response = page.goto(f"{server.url}/trajectory?id={traj_id}")
        assert response is not None and FIRST_SCREEN_ID in response.text()
        pane_steps = page.locator(".st-key-steps_pane .faillab-step")
        expect(pane_steps.first).to_be_visible(timeout=60_000)
        expect(page.locator(f"#{FIRST_SCREEN_ID}")).to_have_count(0)
        wait_idle(page)
        # Nothing covers the page any more: a click reaches Streamlit's own toggle.
        page.get_by_text("Expand all").click()
        expect(page.get_by_role("switch", name="Expand all")).to_be_checked()
    finally:
        context.close()


def test_a_trajectory_without_steps_gives_way_too(browser: Browser,
                                                 local_server: tuple[StreamlitServer, str]
                                                 ) -> None:
    """A results table's answer has no steps for the page to draw: the first screen gives way
    as soon as the page has drawn its verdict box, not after the 30 s that bound it."""
    server, _ = local_server
    answer_only = _answer_only_id(server.workspace)
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    try:
        page = context.new_page()
        response = page.goto(f"{server.url}/trajectory?id={answer_only}")
        assert response is not None and FIRST_SCREEN_ID in response.text()
        expect(page.locator(".st-key-trajectory_verdict")).to_be_attached(timeout=60_000)
        # The removal script looks every 40 ms; 5 s is far inside the 30 s it would wait.
        expect(page.locator(f"#{FIRST_SCREEN_ID}")).to_have_count(0, timeout=5_000)
        expect(page.locator("[data-testid='stMain']").get_by_text(NO_STEPS_QUESTION)
               ).to_be_visible()
    finally:
        context.close()


def test_only_a_signed_in_browser_gets_the_first_screen(
        browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("first-screen-password") / "ws"
    traj_id = _workspace(root)
    store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
    store.users.add("ann", "annotator", password="ann pass phrase")
    token = store.sessions.create("ann", timedelta(hours=1))
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "password"})
    try:
        for cookie, shown in ((None, False), ("forged-token", False), (token, True)):
            context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
            try:
                if cookie:
                    context.add_cookies([{"name": "faillab_session", "value": cookie,
                                          "url": server.url}])
                page = context.new_page()
                response = page.goto(f"{server.url}/trajectory?id={traj_id}")
                assert response is not None
                html = response.text()
                assert (FIRST_SCREEN_ID in html) is shown
                assert ("patient 4711" in html) is shown
            finally:
                context.close()
        store.sessions.end(token)
        context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        try:
            context.add_cookies([{"name": "faillab_session", "value": token, "url": server.url}])
            response = context.new_page().goto(f"{server.url}/trajectory?id={traj_id}")
            assert response is not None and FIRST_SCREEN_ID not in response.text()
        finally:
            context.close()
    finally:
        server.stop()
        store.close()

