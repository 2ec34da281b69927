"""The first faulty step by keyboard, in Chromium: two annotators label the same items with
the step cursor only (J/K, F, a category key), every label carries the step
under the cursor, and the Agreement page then reports step agreement as a number."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from labeling.store import Store
from tests.browser.support import (
    LOCAL_MODE,
    StreamlitServer,
    demo_with_people,
    failed_ids,
    local_sign_in,
    screenshot,
    wait_idle,
)

pytestmark = pytest.mark.browser

ITEMS = 4
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def shared_items(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[tuple[StreamlitServer, Store, list[str]]]:
    root, store = demo_with_people(demo_workspace, tmp_path_factory.mktemp("stepkeys"),
                                   {"ada": "annotator", "bob": "annotator", "lee": "lead"})
    items = failed_ids(root, ITEMS)
    store.queues.assign(items, ["ada", "bob"], overlap=2, double_share=1.0)
    server = StreamlitServer(root, env=LOCAL_MODE)
    try:
        yield server, store, items
    finally:
        server.stop()
        store.close()


def signed_in(browser: Browser, server: StreamlitServer, name: str, path: str) -> Page:
    return local_sign_in(browser, server, name, path, VIEWPORT)


def cursor_line(page: Page) -> str:
    return page.locator(".st-key-annotate_step_where").first.inner_text()


def label_by_keys(page: Page, moves: str, category_key: str) -> int:
    """Move the cursor with ``moves`` (a string of ``j`` and ``k``), mark, save; the step."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    for key in moves:
        # A key that arrives while the previous run is still going is folded into it by
        # Streamlit; wait for the page to be idle so each move is its own.
        wait_idle(page)
        before = cursor_line(page)
        page.keyboard.press(key)
        expect(page.locator(".st-key-annotate_step_where").first).not_to_have_text(before)
    step = int(re.search(r"Step (\d+)", cursor_line(page)).group(1))  # type: ignore[union-attr]
    item = page.locator("[class*='st-key-annotate_item_']").first.get_attribute("class")
    # F and the category key at a fast typist's pace: the second key reaches the server before
    # the browser has drawn the mark, and the label must still carry the step.
    page.keyboard.press("f")
    page.keyboard.press(category_key)
    # The next item, or the empty queue after the last one.
    page.wait_for_function("""(before) => {
        const el = document.querySelector("[class*='st-key-annotate_item_']");
        return !el || el.className !== before; }""", arg=item, timeout=30_000)
    wait_idle(page)
    return step


def test_labels_with_their_step_by_keyboard_alone(
        browser: Browser, shared_items: tuple[StreamlitServer, Store, list[str]]) -> None:
    server, store, items = shared_items
    chosen: dict[str, dict[str, int]] = {}
    for name, moves in (("ada", ""), ("bob", "jk")):
        page = signed_in(browser, server, name, "annotate")
        expect(page.get_by_text(re.compile(r"^Item 1 of"))).to_be_visible(timeout=30_000)
        screenshot(page, f"annotate-step-cursor-{name}")
        # The cursor step, the question and the answer are on screen without an inner scroll.
        for selector in (".st-key-annotate_question", ".st-key-annotate_cursor_step",
                         ".st-key-annotate_answer"):
            box = page.locator(selector).first.bounding_box()
            assert box is not None and box["y"] >= 0, selector
            assert box["y"] + box["height"] <= VIEWPORT["height"], (selector, box)
        chosen[name] = {}
        # Until the queue is empty (items confidently pre-labelled are left to the LLM).
        while page.locator("[class*='st-key-annotate_item_']").count():
            tid = str(page.locator("[class*='st-key-annotate_item_']").first.get_attribute(
                "class")).split("st-key-annotate_item_")[1].split()[0]
            # Bob moves forward and back ("][" ends where it began) on every other item.
            chosen[name][tid] = label_by_keys(page, moves if len(chosen[name]) % 2 == 0
                                              else "", "3")
        expect(page.get_by_text(re.compile(r"queue is empty|nothing else is waiting"))
               ).to_be_visible()
        page.context.close()
    assert sorted(chosen["ada"]) == sorted(chosen["bob"]) == sorted(items)
    for name in ("ada", "bob"):
        labels = {t: lab for t in items for lab in store.labels.for_item(
            t, viewer=None, blind=False, include_llm=False) if lab.annotator == name}
        # Every label carries the step the person marked (not the pre-label's).
        assert {t: lab.first_error_step for t, lab in labels.items()} == chosen[name]
        assert not any(lab.step_from_prelabel for lab in labels.values())
    lead = signed_in(browser, server, "lee", "agreement")
    metric = lead.locator("[data-testid='stMetric']").filter(has_text="Step agreement (exact)")
    expect(metric).to_be_visible(timeout=30_000)
    value = metric.locator("[data-testid='stMetricValue']").inner_text()
    # Both opened each item on the same step and marked it: all four pairs agree.
    assert value == "100.0%", value
    pairs = lead.locator("[data-testid='stMetric']").filter(has_text="Pairs compared")
    assert pairs.locator("[data-testid='stMetricValue']").inner_text() == str(len(chosen["ada"]))
    lead.context.close()
