"""Two annotators label the same failure blind (one by keyboard), then a lead adjudicates it."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from faillab.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from tests.browser.conftest import StreamlitServer, screenshot, wait_idle
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

ANA_NOTE = "ANA-NOTE-7731 the join drops admissions"
BEN_NOTE = "BEN-NOTE-4410 answer given as text"


@pytest.fixture(scope="module")
def setup(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[tuple[StreamlitServer, Store, str]]:
    root = tmp_path_factory.mktemp("annotate") / "ws"
    shutil.copytree(demo_workspace, root)
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    store.users.add("ana", "annotator")
    store.users.add("ben", "annotator")
    store.users.add("lea", "lead")
    tid = str(failed_frame(Workspace(root))["id"].iloc[0])
    store.queues.assign([tid], ["ana", "ben"], overlap=2, double_share=1.0)
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_BLIND": "1",
                                        "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, store, tid
    finally:
        server.stop()
        store.close()


def sign_in(browser: Browser, server: StreamlitServer, name: str, path: str) -> Page:
    page = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
    page.goto(f"{server.url}/{path}")
    wait_idle(page)
    field = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
    field.fill(name)
    field.press("Enter")
    wait_idle(page)
    return page


def write_note(page: Page, text: str) -> None:
    note = page.get_by_label("Note", exact=True).and_(page.locator("textarea"))
    note.fill(text)
    note.press("Control+Enter")  # commits the text area without leaving the keyboard
    wait_idle(page)


def test_blind_double_annotation_then_adjudication(
        browser: Browser, setup: tuple[StreamlitServer, Store, str]) -> None:
    server, store, tid = setup

    ana = sign_in(browser, server, "ana", "annotate")
    expect(ana.get_by_text(tid).first).to_be_visible()
    write_note(ana, ANA_NOTE)
    screenshot(ana, "annotate-ana-item")
    ana.get_by_role("button", name=re.compile(r"^SQL Logic Error")).click()
    wait_idle(ana)
    expect(ana.get_by_text("Saved SQL Logic Error")).to_be_visible()
    expect(ana.get_by_text("Your queue is empty")).to_be_visible()

    ben = sign_in(browser, server, "ben", "annotate")
    expect(ben.get_by_text(tid).first).to_be_visible()
    body = ben.inner_text("body")
    assert "ANA-NOTE-7731" not in body  # blind: ana's note is not on ben's screen
    assert "Labels already on this item" not in body
    write_note(ben, BEN_NOTE)
    # Shortcuts are ignored while typing in a field: leave it, then press 5 (Answer Format).
    ben.get_by_role("heading", name="Annotate failures").click()
    ben.keyboard.press("5")
    wait_idle(ben)
    expect(ben.get_by_text("Saved Answer Format Error")).to_be_visible()
    screenshot(ben, "annotate-ben-saved-by-keyboard")

    # ana, back on the page, still sees only her own work.
    ana.reload()
    wait_idle(ana)
    assert "BEN-NOTE-4410" not in ana.inner_text("body")

    labels = {lab.annotator: lab for lab in store.labels.for_item(tid, viewer=None, blind=False)}
    assert labels["ana"].category == "sql_logic_error" and labels["ana"].note == ANA_NOTE
    assert labels["ben"].category == "answer_format_error" and labels["ben"].note == BEN_NOTE
    assert all(lab.seconds_on_item is not None for lab in labels.values())

    lea = sign_in(browser, server, "lea", "adjudicate")
    expect(lea.get_by_text(f"Trajectory {tid}")).to_be_visible()
    screenshot(lea, "adjudicate-side-by-side")
    body = lea.inner_text("body")
    assert "ANA-NOTE-7731" in body and "BEN-NOTE-4410" in body
    reason = lea.get_by_label("Reason (required)", exact=True).and_(lea.locator("textarea"))
    reason.fill("Rule 2: the wrong join comes first (step 3)")
    lea.get_by_role("button", name="Save decision").click()
    wait_idle(lea)
    expect(lea.get_by_text("(version 1)").first).to_be_visible()
    screenshot(lea, "adjudicate-saved")
    decision = store.adjudications.get(tid)
    assert decision is not None and decision.decided_by == "lea"
    assert decision.reason.startswith("Rule 2")
    for page in (ana, ben, lea):
        page.context.close()
