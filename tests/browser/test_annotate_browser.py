"""Two annotators label the same failure blind (one by keyboard), then a lead adjudicates it."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from faillab_core.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from opinions.learn.trust import machine_routing
from tests.browser.support import StreamlitServer, local_sign_in, screenshot, wait_idle
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
    return local_sign_in(browser, server, name, path, {"width": 1500, "height": 1000})


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
    # The empty queue's Undo takes the queue's last save back.
    ana.keyboard.press("z")
    wait_idle(ana)
    expect(ana.get_by_text("Undone: your label SQL Logic Error")).to_be_visible()
    expect(ana.get_by_text(tid).first).to_be_visible()
    write_note(ana, ANA_NOTE)
    ana.get_by_role("button", name=re.compile(r"^SQL Logic Error")).click()
    wait_idle(ana)
    expect(ana.get_by_text("Your queue is empty")).to_be_visible()
    # Opened afresh on an empty queue: one Undo, a button's width (its Z twin stays hidden).
    ana.reload()
    wait_idle(ana)
    expect(ana.get_by_text("Your queue is empty")).to_be_visible()
    undos = ana.get_by_role("button", name=re.compile("Undo"), include_hidden=True)
    expect(undos.filter(has_text="Undo (Z)")).to_be_hidden()
    expect(undos.filter(visible=True)).to_have_count(1)
    box = undos.filter(visible=True).bounding_box()
    assert box is not None and box["width"] < 400  # a button, not a bar across the page

    ben = sign_in(browser, server, "ben", "annotate")
    expect(ben.get_by_text(tid).first).to_be_visible()
    body = ben.inner_text("body")
    assert "ANA-NOTE-7731" not in body  # blind: ana's note is not on ben's screen
    assert "Labels already on this item" not in body
    write_note(ben, BEN_NOTE)
    # Ctrl+Enter committed the note and left the box, so 5 (Answer Format) saves at once.
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
    reason = lea.get_by_label("Reason (required; Enter saves)", exact=True).and_(
        lea.locator("input"))
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


# -- one screen per decision, keys, undo and an honest queue -------------------------------------

VIEWPORT: ViewportSize = {"width": 1440, "height": 900}


@pytest.fixture(scope="module")
def solo(prelabelled_demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
         ) -> Iterator[tuple[StreamlitServer, Store]]:
    """A workspace with pre-labels and one annotator whose queue starts empty."""
    root = tmp_path_factory.mktemp("solo") / "ws"
    shutil.copytree(prelabelled_demo_workspace, root)  # the demo, pre-labelled (its store too)
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    store.users.add("sol", "annotator")
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, store
    finally:
        server.stop()
        store.close()


def expect_position(page: Page, k: int, n: int, done: int, skipped: int) -> None:
    """The page states this position (waits for the panel's rerun, which a busy machine delays)."""
    line = page.locator("[data-testid='stMarkdownContainer']").filter(
        has_text=f"Item {k} of {n} · {done} labelled · {skipped} skipped")
    expect(line.first).to_be_visible(timeout=30_000)


def inside_viewport(loc: Locator) -> None:
    box = loc.bounding_box()
    assert box is not None, loc
    assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"], (loc, box)
    assert box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], (loc, box)


def test_take_label_skip_undo_in_one_viewport(
        browser: Browser, solo: tuple[StreamlitServer, Store]) -> None:
    server, store = solo
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(f"{server.url}/annotate")
    wait_idle(page)
    field = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
    field.fill("sol")
    field.press("Enter")
    wait_idle(page)

    page.get_by_role("button", name=re.compile(r"^Take 25 unassigned failures")).click()
    wait_idle(page)
    mine = [tid for tid, _, _ in store.queues.assignments("sol")]
    defaults = Settings.from_env({})
    # The page's routing by measured trust (nothing measured here: every item to people).
    machine = machine_routing(store, target=defaults.routing_target,
                              min_checked=defaults.routing_min_checked,
                              spot_check_share=defaults.spot_check_share)
    waiting = store.queues.next_items("sol", left_to_machine=machine.left_to_machine)
    # Take gives what it says, and every item it took is one the queue shows.
    assert len(mine) == 25 and sorted(waiting) == sorted(mine)
    expect_position(page, 1, 25, 0, 0)

    # Everything the decision needs is on screen at once, without scrolling.
    page.evaluate("window.scrollTo(0, 0)")
    for text in ("Answer vs truth", "Reference SQL"):
        inside_viewport(page.get_by_text(text, exact=True).first)
    inside_viewport(page.get_by_label("Note", exact=True).and_(page.locator("textarea")))
    inside_viewport(page.locator(".faillab-diff").first)  # the answer diff
    for name in (r"^Accept pre-label", r"^Skip", r"^Undo", r"^SQL Logic Error", r"^Stuck-in-Loop",
                 r"^Re-run$"):
        inside_viewport(page.get_by_role("button", name=re.compile(name)).first)
    first = waiting[0]
    assert page.get_by_text(first).first.is_visible()
    screenshot(page, "annotate-1440x900")

    # Ctrl+Enter keeps the note and hands the keys back: 3 saves at once.
    note = page.get_by_label("Note", exact=True).and_(page.locator("textarea"))
    note.fill("SOL-NOTE-3391 wrong join")
    note.press("Control+Enter")
    wait_idle(page)
    page.keyboard.press("3")
    wait_idle(page)
    expect_position(page, 2, 25, 1, 0)
    saved = [lab for lab in store.labels.for_item(first, viewer=None, blind=False)
             if lab.source == "human"]
    assert [(lab.category, lab.note) for lab in saved] == [("sql_logic_error",
                                                            "SOL-NOTE-3391 wrong join")]
    # The next item starts at its question, with an empty form (the widgets stay mounted
    # from item to item; their values are reset).
    assert page.evaluate("document.querySelector('[data-testid=stMain]').scrollTop") == 0
    expect(note).to_have_value("")
    for box, empty in (("First faulty step", "not set"), ("Secondary category", "none")):
        picker = page.locator("[data-testid='stSelectbox']").filter(has_text=box).locator("input")
        expect(picker).to_have_value("")
        expect(picker).to_have_attribute("placeholder", empty)

    second = waiting[1]
    page.keyboard.press("s")
    wait_idle(page)
    expect(page.get_by_text(f"Skipped {second[:12]}")).to_be_visible()
    expect_position(page, 3, 25, 1, 1)

    # U retracts the last label: the item is open again (first), progress drops back to 0.
    page.keyboard.press("u")
    wait_idle(page)
    expect_position(page, 2, 25, 0, 1)
    expect(page.get_by_text("Undone: your label SQL Logic Error")).to_be_visible()
    assert page.get_by_text(first).first.is_visible()
    assert [lab for lab in store.labels.for_item(first, viewer=None, blind=False)
            if lab.source == "human"] == []
    assert {p.annotator: p.done for p in store.queues.progress()}["sol"] == 0
    page.keyboard.press("5")
    wait_idle(page)
    expect_position(page, 3, 25, 1, 1)
    counted = [lab for lab in store.labels.for_item(first, viewer=None, blind=False)
               if lab.source == "human"]
    # Undo reopened the item as the label had it (its note too), so one key saves it again.
    assert [(lab.category, lab.note) for lab in counted] == [
        ("answer_format_error", "SOL-NOTE-3391 wrong join")]
    # The retracted label stays in the history, with who retracted it.
    assert [(lab.category, by) for lab, by, _ in store.labels.retracted(first)] == [
        ("sql_logic_error", "sol")]
    page.context.close()
