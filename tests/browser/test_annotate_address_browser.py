"""Annotate keeps the item on screen in the address: a new session (a browser reconnecting to a
restarted replica, a reload) opens on the item the person was on, not on whatever the queue
puts first by then."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from faillab.app.widgets.label_form import ITEM_PARAM
from labeling.store import Store
from tests.browser.support import (
    LOCAL_MODE,
    StreamlitServer,
    demo_with_people,
    failed_ids,
    local_sign_in,
    wait_idle,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def setup(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[tuple[StreamlitServer, Store, list[str]]]:
    root, store = demo_with_people(demo_workspace, tmp_path_factory.mktemp("address"),
                                   {"ana": "annotator"})
    ids = failed_ids(root, 3)
    store.queues.assign(ids, ["ana"], overlap=1, double_share=0.0)
    server = StreamlitServer(root, env=LOCAL_MODE)
    try:
        yield server, store, ids
    finally:
        server.stop()
        store.close()


def test_a_new_session_opens_on_the_item_in_the_address(
        browser: Browser, setup: tuple[StreamlitServer, Store, list[str]]) -> None:
    server, store, ids = setup
    viewport = {"width": 1440, "height": 900}
    page = local_sign_in(browser, server, "ana", "annotate", viewport)
    pattern = re.compile(rf"[?&]{ITEM_PARAM}=([0-9a-f]+)")
    expect(page).to_have_url(pattern, timeout=30_000)
    match = pattern.search(page.url)
    assert match is not None
    first = match.group(1)
    assert first in ids
    expect(page.get_by_text(first).first).to_be_visible()
    other = next(i for i in ids if i != first)
    # Another browser (a new session) whose address names another item of the queue.
    again = local_sign_in(browser, server, "ana", f"annotate?{ITEM_PARAM}={other}", viewport)
    expect(again.get_by_text(other).first).to_be_visible(timeout=30_000)
    expect(again.get_by_text("Back where you were")).to_be_visible()
    # The key saves that item, and the address moves on with the next one.
    again.get_by_role("button", name=re.compile(r"^SQL Logic Error")).click()
    wait_idle(again)
    expect(again.get_by_text("Saved SQL Logic Error")).to_be_visible()
    assert [lab.annotator for lab in store.labels.for_item(other, viewer=None, blind=False)] \
        == ["ana"]
    expect(again).to_have_url(pattern)
    moved = pattern.search(again.url)
    assert moved is not None and moved.group(1) != other
    for p in (page, again):
        p.context.close()
