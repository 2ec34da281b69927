"""Sign-in and people in a real browser: the sign-in form in the main area, no page names before
sign-in (and no lead page names for annotators), a password change, the Secure cookie behind an
https proxy, and local-mode lead pages that say how to become a lead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from labeling.store import open_store
from tests.browser.support import StreamlitServer, screenshot, wait_idle
from tests.browser.test_access_browser import make_workspace

pytestmark = pytest.mark.browser

PASSWORD = "first pass phrase"
NEW_PASSWORD = "second pass phrase"
MENU = ["Overview", "Browse", "Trajectory", "Annotate", "Clusters", "Pre-label", "Review tasks",
        "Statistics"]
LEAD_MENU = ["Adjudicate", "Agreement", "Adjudicate tasks", "Audit report"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StreamlitServer, Path]]:
    root = tmp_path_factory.mktemp("people") / "ws"
    make_workspace(root)
    store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
    store.users.add("ann", "annotator", password=PASSWORD)
    store.users.add("lee", "lead", password=PASSWORD)
    store.users.add("pat", "annotator", password=PASSWORD)
    store.close()
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "password"})
    try:
        yield server, root
    finally:
        server.stop()


def _main(page: Page) -> Locator:
    return page.locator("[data-testid='stMain']")


def _sidebar(page: Page) -> Locator:
    return page.locator("[data-testid='stSidebar']")


def sign_in(page: Page, name: str, password: str) -> None:
    _main(page).get_by_role("textbox", name="Name", exact=True).fill(name)
    _main(page).get_by_role("textbox", name="Password", exact=True).fill(password)
    _main(page).get_by_role("button", name="Sign in").click()
    wait_idle(page)


def menu(page: Page) -> list[str]:
    """The page names in the sidebar menu (none when it is not drawn)."""
    links = page.locator("[data-testid='stSidebarNav'] a")
    return [t.strip() for t in links.all_inner_texts()]


def test_sign_in_form_is_in_the_main_area_and_no_page_name_shows_before(
    browser: Browser, server: tuple[StreamlitServer, Path]
) -> None:
    srv, _ = server
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        for path in ("", "adjudicate", "statistics"):
            page.goto(f"{srv.url}/{path}")
            wait_idle(page)
            form = _main(page).get_by_role("textbox", name="Name", exact=True)
            expect(form).to_be_visible()
            box = form.bounding_box()
            assert box is not None and box["y"] < 800  # in view, without scrolling
            assert _sidebar(page).get_by_role("textbox").count() == 0
            assert page.get_by_text("(sidebar)").count() == 0
            assert menu(page) == []
            text = page.inner_text("body")
            for name in [*MENU, *LEAD_MENU]:
                assert name not in text.splitlines(), name
        screenshot(page, "people-sign-in-form")
    finally:
        page.close()


def test_menu_shows_lead_pages_to_leads_only(
    browser: Browser, server: tuple[StreamlitServer, Path]
) -> None:
    srv, _ = server
    for name, expected in (("ann", MENU), ("lee", MENU[:4] + LEAD_MENU[:2] + MENU[4:7]
                                          + LEAD_MENU[2:] + MENU[7:])):
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(srv.url)
            wait_idle(page)
            sign_in(page, name, PASSWORD)
            expect(page.get_by_text(f"Signed in as {name}")).to_be_visible()
            assert menu(page) == expected, name
            if name == "ann":  # a lead page opened by its address still says what it is
                page.goto(f"{srv.url}/agreement")
                wait_idle(page)
                expect(page.get_by_text("This page is for leads or admins")).to_be_visible()
                expect(page.get_by_text("faillab users role ann lead")).to_be_visible()
        finally:
            context.close()


def test_signed_in_user_changes_their_password(
    browser: Browser, server: tuple[StreamlitServer, Path]
) -> None:
    srv, root = server
    other = browser.new_context()  # pat is also signed in elsewhere
    other_page = other.new_page()
    context = browser.new_context()
    page = context.new_page()
    try:
        other_page.goto(srv.url)
        wait_idle(other_page)
        sign_in(other_page, "pat", PASSWORD)
        page.goto(f"{srv.url}/browse")
        wait_idle(page)
        sign_in(page, "pat", PASSWORD)
        sidebar = _sidebar(page)
        sidebar.get_by_text("Change password").click()
        sidebar.get_by_label("Current password", exact=True).fill(PASSWORD)
        sidebar.get_by_label("New password", exact=True).fill("short")
        sidebar.get_by_label("New password again", exact=True).fill("short")
        sidebar.get_by_role("button", name="Save new password").click()
        wait_idle(page)
        expect(sidebar.get_by_text("too short: at least 8 characters")).to_be_visible()

        sidebar.get_by_label("Current password", exact=True).fill(PASSWORD)
        sidebar.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        sidebar.get_by_label("New password again", exact=True).fill(NEW_PASSWORD)
        sidebar.get_by_role("button", name="Save new password").click()
        wait_idle(page)
        expect(sidebar.get_by_text("Password changed")).to_be_visible()
        screenshot(page, "people-password-changed")

        page.reload()  # this browser stays signed in
        wait_idle(page)
        expect(page.get_by_text("Signed in as pat (annotator)")).to_be_visible()
        other_page.reload()  # the other one was signed out
        wait_idle(other_page)
        expect(_main(other_page).get_by_role("button", name="Sign in")).to_be_visible()
        sign_in(other_page, "pat", PASSWORD)
        expect(other_page.get_by_text("Unknown name or wrong password.")).to_be_visible()
        sign_in(other_page, "pat", NEW_PASSWORD)
        expect(other_page.get_by_text("Signed in as pat (annotator)")).to_be_visible()
    finally:
        context.close()
        other.close()
    store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
    try:
        assert store.users.verify_password("pat", NEW_PASSWORD) is not None
    finally:
        store.close()


@pytest.mark.parametrize(("headers", "secure"), [
    ({}, False),
    ({"X-Forwarded-Proto": "https"}, True),  # a TLS-terminating proxy in front
])
def test_session_cookie_is_secure_behind_an_https_proxy(
    browser: Browser, server: tuple[StreamlitServer, Path], headers: dict[str, str],
    secure: bool,
) -> None:
    srv, _ = server
    context = browser.new_context(extra_http_headers=headers)
    page = context.new_page()
    try:
        page.goto(srv.url)
        wait_idle(page)
        sign_in(page, "ann", PASSWORD)
        expect(page.get_by_text("Signed in as ann")).to_be_visible()
        cookie = next(c for c in context.cookies() if c["name"] == "faillab_session")
        assert cookie["secure"] is secure
    finally:
        context.close()


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamlitServer]:
    root = tmp_path_factory.mktemp("people-local") / "ws"
    make_workspace(root)
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none"})
    try:
        yield server
    finally:
        server.stop()


def test_local_mode_lead_pages_say_how_to_become_a_lead(
    browser: Browser, local_server: StreamlitServer
) -> None:
    page = browser.new_page()
    try:
        page.goto(f"{local_server.url}/adjudicate")
        wait_idle(page)
        field = _sidebar(page).get_by_role("textbox", name="Your name", exact=True)
        field.fill("ann1")
        field.press("Enter")
        wait_idle(page)
        expect(page.get_by_text("This page is for leads or admins")).to_be_visible()
        expect(page.get_by_text("faillab users role ann1 lead")).to_be_visible()
        # Local mode lists the lead pages too: they are where this is said.
        assert "Adjudicate" in menu(page)
        screenshot(page, "people-local-become-lead")
    finally:
        page.close()
