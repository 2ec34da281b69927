"""Annotate on real logs at both supported sizes, in Chromium: the AI612 tau-bench runs (run
names of about a hundred characters, system prompts of several screens, SQL over many lines),
imported as a team would import them. Whatever the item, the question, the step under the
cursor (its SQL and the start of its output), the answer against the truth and every control a
person acts on are on screen without scrolling, and no control's text is cut."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser, Locator, ViewportSize, expect

from faillab.cli import main
from faillab_core.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from tests.browser.support import StreamlitServer, cut_controls, local_sign_in, screenshot
from tests.support import SHARED_DATA, require_shared
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

AI612 = SHARED_DATA / "trajectories" / "ai612-student"
SIZES = [("wide", {"width": 1440, "height": 900}), ("narrow", {"width": 1280, "height": 800})]
ITEMS = 3  # items walked through per size: a long system prompt, long SQL, a loop


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StreamlitServer, Store]]:
    folder = require_shared(AI612)
    root = tmp_path_factory.mktemp("real-logs") / "ws"
    result = CliRunner().invoke(main, ["import", str(folder), "--workspace", str(root)])
    assert result.exit_code == 0, result.output
    failures = [str(t) for t in failed_frame(Workspace(root))["id"]]
    # The longest run names first: the layout must hold them.
    runs = Workspace(root).frame().set_index("id")["run"].astype(str)
    failures.sort(key=lambda t: -len(runs[t]))
    assert len(runs[failures[0]]) >= 100
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    for name, _ in SIZES:
        store.users.add(name, "annotator")
        store.queues.assign(failures[:ITEMS], [name], overlap=1)
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, store
    finally:
        server.stop()
        store.close()


def inside(loc: Locator, viewport: ViewportSize, what: str) -> None:
    expect(loc).to_be_visible(timeout=30_000)
    box = loc.bounding_box()
    assert box is not None, what
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"] + 1, (what, box)
    assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"] + 1, (what, box)


@pytest.mark.parametrize(("user", "viewport"), SIZES, ids=["1440x900", "1280x800"])
def test_real_items_fit_the_screen(browser: Browser, real: tuple[StreamlitServer, Store],
                                   user: str, viewport: ViewportSize) -> None:
    server, _ = real
    page = local_sign_in(browser, server, user, "annotate",
                         {"width": viewport["width"], "height": viewport["height"]})
    expect(page.get_by_text(re.compile(r"^Item 1 of"))).to_be_visible(timeout=60_000)
    for n in range(ITEMS):
        expect(page.get_by_text(re.compile(rf"^Item {n + 1} of"))).to_be_visible(
            timeout=60_000)
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, f"annotate-real-{viewport['width']}x{viewport['height']}-{n}")
        inside(page.locator(".st-key-annotate_question").first, viewport, "question")
        cursor = page.locator(".st-key-annotate_cursor_step").first
        expect(cursor).to_be_visible(timeout=30_000)
        # The step's action (its SQL or arguments) whole, and the start of what it returned.
        code = cursor.locator(".faillab-code")
        if code.count():
            inside(code.first, viewport, "the cursor step's SQL")
            returned = cursor.locator(".faillab-code + *")
            if returned.count():
                box = returned.first.bounding_box()
                assert box is not None and box["y"] + 16 <= viewport["height"], box
        else:
            box = cursor.bounding_box()
            assert box is not None and box["y"] + 60 <= viewport["height"], box
        inside(page.locator(".st-key-annotate_answer").first, viewport, "answer vs truth")
        for name in (r"^Skip", r"^Semantic Misunder", r"^Medical-Code Look",
                     r"^SQL Logic Error", r"^Answer Format Error", r"^Stuck-in-Loop"):
            inside(page.get_by_role("button", name=re.compile(name)).first, viewport, name)
        inside(page.get_by_label("First faulty step", exact=True).first, viewport, "step")
        assert cut_controls(page) == []
        item = page.locator("[class*='st-key-annotate_item_']").first.get_attribute("class")
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        page.keyboard.press("s")  # skip to the next real item
        page.wait_for_function("""(before) => {
            const el = document.querySelector("[class*='st-key-annotate_item_']");
            return !el || el.className !== before; }""", arg=item, timeout=60_000)
    page.context.close()
