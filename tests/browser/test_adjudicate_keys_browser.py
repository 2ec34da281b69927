"""Adjudicate by keys, in Chromium at 1280x800: the raters' cards and the decision form are on
the first screen, ``?`` lists the keys, a digit takes a rater's label, the focus is then in the
reason box and Enter saves the decision."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from labeling.store import Store
from taxonomy import default_taxonomy
from tests.browser.support import (
    LOCAL_MODE,
    StreamlitServer,
    demo_with_people,
    failed_ids,
    local_sign_in,
    screenshot,
)

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def disputed(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
             ) -> Iterator[tuple[StreamlitServer, Store, str]]:
    root, store = demo_with_people(demo_workspace, tmp_path_factory.mktemp("adjkeys"),
                                   {"ana": "annotator", "ben": "annotator", "lee": "lead"})
    tid = failed_ids(root, 1)[0]
    version = default_taxonomy().version
    store.labels.add(tid, "sql_logic_error", annotator="ana", taxonomy_version=version,
                     note="ANA: the join is wrong")
    store.labels.add(tid, "semantic_misunderstanding", annotator="ben", taxonomy_version=version,
                     first_error_step=1, note="BEN: misread the question")
    server = StreamlitServer(root, env=LOCAL_MODE)
    try:
        yield server, store, tid
    finally:
        server.stop()
        store.close()


def as_lead(browser: Browser, server: StreamlitServer) -> Page:
    return local_sign_in(browser, server, "lee", "adjudicate", VIEWPORT)


def test_a_decision_by_keys_alone(browser: Browser,
                                  disputed: tuple[StreamlitServer, Store, str]) -> None:
    server, store, tid = disputed
    page = as_lead(browser, server)
    save = page.get_by_role("button", name="Save decision")
    expect(save).to_be_visible(timeout=30_000)
    screenshot(page, "adjudicate_keys_1280")
    # Decide where you read: both raters' cards and the whole form on the first screen.
    for locator in (page.locator(".st-key-adj_card_0"), page.locator(".st-key-adj_card_1"),
                    save):
        box = locator.bounding_box()
        assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"], box
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    # ? lists the keys; Escape closes the list.
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("take rater B's label")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    # 2 takes rater B (ben); the reason box then has the focus and Enter saves.
    page.keyboard.press("2")
    expect(page.get_by_text(re.compile(r"Taken from Rater B"))).to_be_visible()
    reason = page.get_by_label(re.compile(r"^Reason"))
    expect(reason).to_be_focused()
    page.keyboard.type("ben read the rubric right")
    page.keyboard.press("Enter")
    expect(page.get_by_text(re.compile(r"^Saved: "))).to_be_visible(timeout=30_000)
    decision = store.adjudications.get(tid)
    assert decision is not None
    assert (decision.category, decision.first_error_step, decision.decided_by) == (
        "semantic_misunderstanding", 1, "lee")
    assert decision.reason == "ben read the rubric right"
    page.context.close()
