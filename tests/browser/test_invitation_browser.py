"""A team by invitation links, in Chromium: ``faillab team --invite`` prints a link for each
person; the second annotator opens theirs in a fresh browser, sets a password, is signed in
(the token leaves the address bar; a reload stays signed in) and finds their first item on
Annotate; the same link then opens nothing but the ordinary sign-in form."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser, expect

from faillab.cli import main
from tests.browser.support import StreamlitServer, screenshot, wait_idle

pytestmark = pytest.mark.browser

PEOPLE = "name,role\nlea,lead\nana\nben\n"


@pytest.fixture(scope="module")
def invited(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[StreamlitServer, dict[str, str]]]:
    root = tmp_path_factory.mktemp("invite") / "ws"
    shutil.copytree(demo_workspace, root)
    env = {"FAILLAB_AUTH": "password", "FAILLAB_DATABASE_URL": ""}
    server = StreamlitServer(root, env=env)
    try:
        result = CliRunner().invoke(
            main, ["team", "-", "--workspace", str(root), "--json", "--invite", "--url",
                   server.url, "--limit", "6"], input=PEOPLE, env=env)
        assert result.exit_code == 0, result.stderr
        links = {p["name"]: p["invite"] for p in json.loads(result.stdout)["people"]}
        yield server, links
    finally:
        server.stop()


def test_the_second_annotator_joins_by_link_and_gets_work(
        browser: Browser, invited: tuple[StreamlitServer, dict[str, str]]) -> None:
    server, links = invited
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto(links["ben"])
        wait_idle(page, 60_000)
        main_area = page.locator("[data-testid='stMain']")
        expect(main_area.get_by_text("Welcome, ben.")).to_be_visible(timeout=30_000)
        main_area.get_by_label("New password", exact=True).fill("ben's pass phrase")
        main_area.get_by_label("New password again", exact=True).fill("ben's pass phrase")
        main_area.get_by_role("button", name="Set password and sign in").click()
        expect(page.get_by_text("Signed in as ben (annotator)")).to_be_visible(timeout=30_000)
        page.wait_for_url(lambda url: "invite=" not in url, timeout=30_000)
        wait_idle(page)
        page.reload()  # the session cookie holds
        wait_idle(page, 60_000)
        expect(page.get_by_text("Signed in as ben (annotator)")).to_be_visible(timeout=30_000)
        page.goto(f"{server.url}/annotate")
        wait_idle(page, 60_000)
        expect(page.get_by_text(re.compile(r"^Item 1 of"))).to_be_visible(timeout=60_000)
        screenshot(page, "invitation-first-item")
    finally:
        context.close()

    # The link is spent: a fresh browser sees why, and the ordinary sign-in form.
    again = browser.new_context().new_page()
    try:
        again.goto(links["ben"])
        wait_idle(again, 60_000)
        expect(again.get_by_text(re.compile("unknown, already used or expired"))).to_be_visible(
            timeout=30_000)
        expect(again.get_by_role("button", name="Sign in")).to_be_visible()
    finally:
        again.context.close()
