"""Two annotators review the same audit item in two browser sessions; neither sees the other's
judgment, and one judgment is made with the keyboard shortcut. The keys work right after an
audit is chosen in the drop-down, and reasons have keys of their own."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from faillab_core.settings import Settings
from labeling.audit import candidate_pool, create_audit, plan_audit
from labeling.store import open_store
from tests.browser.support import StreamlitServer, cut_controls, screenshot, wait_idle
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

NOTE_ANA = "ana-private-note-7731"
NOTE_BEN = "ben-private-note-4420"


@pytest.fixture(scope="module")
def audit_server(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[tuple[StreamlitServer, str, list[str]]]:
    root = tmp_path_factory.mktemp("audit_browser") / "ws"
    shutil.copytree(demo_workspace, root)
    url = Settings.from_env({"FAILLAB_WORKSPACE": str(root)}).annotations_url()
    store = open_store(url)
    store.users.add("ana")
    store.users.add("ben")
    store.users.add("cy")
    # An older audit, so the drop-down has a choice to make (the newest is the default).
    other = plan_audit(candidate_pool(Workspace(root), ["sim-small/t0.0"]), n=3, seed=1)
    create_audit(store, other, name="other-audit", annotators=["ben", "cy"])
    plan = plan_audit(candidate_pool(Workspace(root), ["sim-small/t0.0"]), n=4, seed=0)
    create_audit(store, plan, name="browser-audit", annotators=["ana", "ben"])
    store.close()
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, url, [c.task_id for c in plan.items]
    finally:
        server.stop()


def open_as(browser: Browser, server: StreamlitServer, name: str,
            viewport: tuple[int, int] = (1440, 900)) -> Page:
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    page = context.new_page()
    page.goto(f"{server.url}/audit-review")
    wait_idle(page)
    box = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
    box.fill(name)
    box.press("Enter")
    wait_idle(page)
    return page


def sign_in(browser: Browser, server: StreamlitServer, name: str,
            viewport: tuple[int, int] = (1440, 900)) -> Page:
    page = open_as(browser, server, name, viewport)
    expect(page.get_by_text("Task 1 of 4")).to_be_visible()
    return page


def test_two_annotators_review_blind(browser: Browser,
                                     audit_server: tuple[StreamlitServer, str, list[str]]) -> None:
    server, url, tids = audit_server
    ana = sign_in(browser, server, "ana")
    ben = sign_in(browser, server, "ben", viewport=(1280, 800))
    try:
        # Every button and label whole at both sizes (the reasons read "1 · Borderline te…").
        expect(ana.get_by_role("button", name=re.compile("Borderline temporal"))).to_be_visible()
        assert cut_controls(ana) == [] and cut_controls(ben) == []
        # Ana writes a note, leaves the text box, and judges with the keyboard (V).
        ana.get_by_role("textbox", name="Note").fill(NOTE_ANA)
        ana.get_by_role("heading", name="Your judgment").click()  # blur: commits the note
        wait_idle(ana)
        ana.keyboard.press("v")
        wait_idle(ana)
        expect(ana.get_by_text("Task 2 of 4")).to_be_visible()
        screenshot(ana, "audit-review-ana-after-shortcut")

        # Ben judges the same first task with the button.
        ben.get_by_role("textbox", name="Note").fill(NOTE_BEN)
        ben.get_by_role("heading", name="Your judgment").click()
        wait_idle(ben)
        ben.get_by_role("button", name=re.compile(r"^Valid")).click()
        wait_idle(ben)
        expect(ben.get_by_text("Task 2 of 4")).to_be_visible()

        # Both go back to task 1 (ana with [, the previous-item key of every page; ben with
        # the button): each sees their own note and never the other's.
        for page, own, other in ((ana, NOTE_ANA, NOTE_BEN), (ben, NOTE_BEN, NOTE_ANA)):
            if page is ana:
                page.evaluate("() => document.activeElement && document.activeElement.blur()")
                page.keyboard.press("[")
            else:
                page.get_by_role("button", name="Previous").click()
            wait_idle(page)
            expect(page.get_by_text("Task 1 of 4")).to_be_visible()
            expect(page.get_by_role("textbox", name="Note")).to_have_value(own)
            assert other not in page.content()
            assert "sim-small" not in page.content()  # blind to runs, too
        screenshot(ana, "audit-review-ana-task1")
        screenshot(ben, "audit-review-ben-task1")
        # ] is the next task, as it is the next failure on Trajectory.
        ana.evaluate("() => document.activeElement && document.activeElement.blur()")
        ana.keyboard.press("]")
        expect(ana.get_by_text("Task 2 of 4")).to_be_visible(timeout=30_000)
    finally:
        ana.context.close()
        ben.context.close()

    store = open_store(url)
    try:
        got = {(j.annotator, j.task_id): (j.valid, j.note)
               for j in store.audits.judgments("browser-audit")}
    finally:
        store.close()
    assert got == {("ana", tids[0]): (True, NOTE_ANA), ("ben", tids[0]): (True, NOTE_BEN)}


def test_audit_keys_work_right_after_choosing_an_audit(
        browser: Browser, audit_server: tuple[StreamlitServer, str, list[str]]) -> None:
    server, url, _ = audit_server
    cy = open_as(browser, server, "cy")  # cy reviews only the older audit, not the default
    try:
        expect(cy.get_by_text("No task of this audit is assigned to you.")).to_be_visible()
        cy.wait_for_function("() => window.__faillabBlurAfterChoice === true")
        cy.get_by_role("combobox", name=re.compile("Audit")).click()
        cy.get_by_role("option", name="other-audit").click()
        # The focus leaves the select box at the choice itself, long before the chosen audit
        # has drawn (a rerun and an iframe load), so no shortcut typed meanwhile lands in it.
        focused_role = cy.evaluate(
            "() => new Promise((done) => setTimeout(() => "
            "done(document.activeElement && document.activeElement.getAttribute('role')), 50))")
        assert focused_role != "combobox"
        wait_idle(cy)
        expect(cy.get_by_text("Task 1 of 3")).to_be_visible()
        # No click anywhere first: the page hands the focus back by itself once the chosen
        # audit has drawn (the select box would otherwise take the key as search text), so
        # the key must reach the page, not the select box.
        expect(cy.get_by_role("combobox", name=re.compile("Audit"))).not_to_be_focused()
        cy.keyboard.press("v")
        wait_idle(cy)
        expect(cy.get_by_text("Task 2 of 3")).to_be_visible()
        # Read, then judge: the judgment sits under the task's reference SQL and result, and
        # the reference SQL's heading and the Valid button fit on one 1440x900 screen.
        valid = cy.get_by_role("button", name=re.compile(r"^Valid"))
        box = valid.bounding_box()
        sql = cy.get_by_text("Reference SQL", exact=True).first.bounding_box()
        assert box is not None and sql is not None
        assert sql["y"] < box["y"] and box["y"] + box["height"] - sql["y"] <= 900, (sql, box)
        cy.keyboard.press("2")  # invalid, second reason code, in one key
        wait_idle(cy)
        expect(cy.get_by_text("Task 3 of 3")).to_be_visible()
        screenshot(cy, "audit-review-keys-after-choosing")
    finally:
        cy.context.close()

    store = open_store(url)
    try:
        got = [(j.valid, j.reason) for j in store.audits.judgments("other-audit")
               if j.annotator == "cy"]
    finally:
        store.close()
    assert got == [(True, None), (False, "cohort_unit")]
