"""The note a person wrote beside a verdict in an imported file (the real claude-sonnet-4
answer table's "Incorrect Note") is on screen with the outcome, in Chromium: on Trajectory (in
the server's first screen and on the interactive page) and on Annotate."""

from __future__ import annotations

import csv
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser, expect

from faillab.app.first_screen import FIRST_SCREEN_ID
from faillab.app.widgets.answer import outcome_note
from faillab.cli import main
from faillab_core.settings import Settings
from labeling.store import Store, open_store
from tests.browser.support import StreamlitServer, local_sign_in
from tests.support import CLAUDE_ANSWERS, require_shared
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def noted(tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[StreamlitServer, Store, str, str]]:
    table = require_shared(CLAUDE_ANSWERS)
    root = tmp_path_factory.mktemp("outcome-note") / "ws"
    result = CliRunner().invoke(main, ["import", str(table), "--workspace", str(root)])
    assert result.exit_code == 0, result.output
    with table.open(encoding="utf-8") as fh:
        written = {r["Incorrect Note"].strip() for r in csv.DictReader(fh)} - {""}
    ws = Workspace(root)
    notes = {}
    for traj_id in ws.frame()["id"]:
        traj = ws.get(str(traj_id))
        note = outcome_note(traj) if traj is not None else None
        if note:
            notes[str(traj_id)] = note
    # Every note the people wrote in the file is kept with its trajectory.
    assert set(notes.values()) == written and written
    traj_id, note = sorted(notes.items())[0]
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    store.users.add("nora", "annotator")
    store.queues.assign([traj_id], ["nora"], overlap=1)
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, store, traj_id, note
    finally:
        server.stop()
        store.close()


def _snippet(note: str) -> str:
    # A stretch of the note that lies within one line of text whatever the wrapping.
    return note[:40]


def test_the_note_is_on_the_trajectory_page(
        browser: Browser, noted: tuple[StreamlitServer, Store, str, str]) -> None:
    server, _, traj_id, note = noted
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    try:
        page = context.new_page()
        response = page.goto(f"{server.url}/trajectory?id={traj_id}")
        assert response is not None
        first_screen = response.text()
        assert FIRST_SCREEN_ID in first_screen and "Note with the recorded outcome" in first_screen
        main_area = page.locator("[data-testid='stMain']")
        expect(main_area.get_by_text("Note with the recorded outcome")).to_be_visible(
            timeout=60_000)
        expect(main_area.get_by_text(_snippet(note), exact=False)).to_be_visible()
    finally:
        context.close()


def test_the_note_is_on_annotate(browser: Browser,
                                 noted: tuple[StreamlitServer, Store, str, str]) -> None:
    server, _, _, note = noted
    page = local_sign_in(browser, server, "nora", "annotate", VIEWPORT)
    try:
        main_area = page.locator("[data-testid='stMain']")
        expect(main_area.get_by_text("Note with the recorded outcome")).to_be_visible(
            timeout=60_000)
        expect(main_area.get_by_text(_snippet(note), exact=False)).to_be_visible()
    finally:
        page.context.close()
