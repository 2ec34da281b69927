"""Access rules in a real browser: the sign-in gate, roles, sessions across reloads and deep
links, sign-out, and the local-mode identity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from labeling.store import open_store
from tests.browser.support import StreamlitServer, wait_idle
from tests.support import make_trajectory
from trajectories.model import Task
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

SECRET = "Which secret drug did patient 4711 receive"
ANN_PASSWORD = "ann pass phrase"
LEE_PASSWORD = "lee pass phrase"
PAGES = ["overview", "browse", "trajectory", "annotate", "adjudicate", "agreement", "prelabel",
         "audit-review", "audit-adjudicate", "audit-report", "statistics"]


def make_workspace(root: Path) -> tuple[Workspace, str]:
    ws = Workspace(root)
    traj = make_trajectory(
        task=Task(id="secret-1", question=SECRET, intent="Medications", scope="patient",
                  ground_truth=[["aspirin"]], reference_sql="SELECT 1"),
        final_answer="aspirin-secret-answer",
    ).with_id()
    ws.add([(traj, None)])
    return ws, str(traj.id)


@pytest.fixture(scope="module")
def password_server(tmp_path_factory: pytest.TempPathFactory,
                    ) -> Iterator[tuple[StreamlitServer, str, Path]]:
    root = tmp_path_factory.mktemp("access") / "ws"
    _, traj_id = make_workspace(root)
    store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
    store.users.add("ann", "annotator", password=ANN_PASSWORD)
    store.users.add("lee", "lead", password=LEE_PASSWORD)
    store.close()
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "password"})
    try:
        yield server, traj_id, root
    finally:
        server.stop()


def sign_in(page: Page, name: str, password: str) -> None:
    """Through the sign-in form, which sits in the main area."""
    main = page.locator("[data-testid='stMain']")
    main.get_by_role("textbox", name="Name", exact=True).fill(name)
    main.get_by_role("textbox", name="Password", exact=True).fill(password)
    main.get_by_role("button", name="Sign in").click()
    wait_idle(page)


def test_anonymous_visitor_gets_no_page(browser: Browser,
                                        password_server: tuple[StreamlitServer, str, Path]) -> None:
    server, traj_id, _ = password_server
    page = browser.new_page()
    try:
        for path in PAGES:
            query = f"?id={traj_id}" if path == "trajectory" else ""
            page.goto(f"{server.url}/{path}{query}")
            wait_idle(page)
            expect(page.get_by_role("button", name="Sign in")).to_be_visible()
            html = page.content()
            assert SECRET not in html and "aspirin-secret-answer" not in html, path
            assert page.get_by_role("button", name="Re-run SQL").count() == 0
    finally:
        page.close()


def test_annotator_session_survives_reload_and_deep_link_until_sign_out(
    browser: Browser, password_server: tuple[StreamlitServer, str, Path]
) -> None:
    server, traj_id, _ = password_server
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{server.url}/adjudicate")
        wait_idle(page)
        sign_in(page, "ann", ANN_PASSWORD)
        expect(page.get_by_text("Signed in as ann (annotator)")).to_be_visible()
        expect(page.get_by_text("This page is for leads or admins")).to_be_visible()
        cookie = next(c for c in context.cookies() if c["name"] == "faillab_session")
        assert cookie["sameSite"] == "Strict"

        page.reload()
        wait_idle(page)
        expect(page.get_by_text("Signed in as ann (annotator)")).to_be_visible()

        tab = context.new_page()  # a shared deep link in a new tab
        tab.goto(f"{server.url}/trajectory?id={traj_id}")
        wait_idle(tab)
        expect(tab.get_by_text("Signed in as ann (annotator)")).to_be_visible()
        # The sidebar draws before the trajectory's own fragment: wait for the question.
        expect(tab.locator("[data-testid='stMain']")).to_contain_text(SECRET, timeout=30_000)
        tab.close()

        page.locator("[data-testid='stSidebar']").get_by_role("button", name="Sign out").click()
        wait_idle(page)
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()

        # The old token is dead server-side, even if someone kept a copy of the cookie.
        thief = browser.new_context()
        thief.add_cookies([{"name": "faillab_session", "value": cookie["value"],
                            "url": server.url}])
        stolen = thief.new_page()
        stolen.goto(f"{server.url}/trajectory?id={traj_id}")
        wait_idle(stolen)
        expect(stolen.get_by_role("button", name="Sign in")).to_be_visible()
        assert SECRET not in stolen.content()
        thief.close()
    finally:
        context.close()


def test_lead_reaches_lead_pages(browser: Browser,
                                 password_server: tuple[StreamlitServer, str, Path]) -> None:
    server, _, _ = password_server
    page = browser.new_page()
    try:
        page.goto(f"{server.url}/agreement")
        wait_idle(page)
        sign_in(page, "lee", LEE_PASSWORD)
        expect(page.get_by_text("Signed in as lee (lead)")).to_be_visible()
        assert page.get_by_text("This page is for").count() == 0
    finally:
        page.close()


@pytest.fixture(scope="module")
def local_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[StreamlitServer, Path]]:
    root = tmp_path_factory.mktemp("local") / "ws"
    make_workspace(root)
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none"})
    try:
        yield server, root
    finally:
        server.stop()


def test_local_identity_sticks_and_shortcut_keys_never_change_it(
    browser: Browser, local_server: tuple[StreamlitServer, Path]
) -> None:
    server, root = local_server
    page = browser.new_page()
    try:
        page.goto(f"{server.url}/annotate")
        wait_idle(page)
        sidebar = page.locator("[data-testid='stSidebar']")
        sidebar.get_by_role("textbox", name="Your name", exact=True).fill("ann1")
        sidebar.get_by_role("textbox", name="Your name", exact=True).press("Enter")
        wait_idle(page)
        expect(page.get_by_text("Signed in as ann1 (annotator)")).to_be_visible()
        # The name is read-only from now on: no text box for a shortcut key to type into.
        assert sidebar.get_by_role("textbox", name="Your name", exact=True).count() == 0
        for key in ("a", "A", "n", "Enter"):
            page.keyboard.press(key)
        wait_idle(page)
        page.get_by_role("link", name="Browse").click()
        wait_idle(page)
        expect(page.get_by_text("Signed in as ann1 (annotator)")).to_be_visible()
        page.reload()
        wait_idle(page)
        expect(page.get_by_text("Signed in as ann1 (annotator)")).to_be_visible()
        store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
        try:
            assert [(u.name, u.role) for u in store.users.all()] == [("ann1", "annotator")]
        finally:
            store.close()
    finally:
        page.close()
