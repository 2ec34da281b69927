"""The Annotate screen at both supported sizes, true undo, the re-run error label and the
`make run` demo with pre-labels, in a real Chromium."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from faillab_core.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from tests.browser.support import (
    StreamlitServer,
    cut_controls,
    free_port,
    local_sign_in,
    screenshot,
    wait_idle,
)
from tests.support import REPO, make_trajectory, wait_for_health
from trajectories.model import Outcome, Step, StepKind, Task
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

BROKEN_SQL = "SELECT no_such_column FROM no_such_table"


@pytest.fixture(scope="module")
def screen(prelabelled_demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[tuple[StreamlitServer, Store, str]]:
    """The demo with heuristic pre-labels, plus one failure whose SQL step errors on re-run."""
    root = tmp_path_factory.mktemp("screen") / "ws"
    shutil.copytree(prelabelled_demo_workspace, root)  # pre-labelled, its store included
    broken = make_trajectory(
        task=Task(id="broken-1", question="How many patients are there?", intent="Demographics",
                  scope="population", reference_sql="SELECT count(*) FROM patients",
                  ground_truth=[[300]], answer_format="a single number"),
        steps=[Step(kind=StepKind.MESSAGE, role="user", content="How many patients are there?"),
               Step(kind=StepKind.SQL, code=BROKEN_SQL, error=True,
                    observation="Catalog Error: Table with name no_such_table does not exist!"),
               Step(kind=StepKind.MESSAGE, role="assistant", content="I could not tell.")],
        final_answer=None, outcome=Outcome(success=False)).with_id()
    # Added after pre-labelling: with no pre-label it always waits for a person.
    Workspace(root).add([(broken, "broken")])
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    for name in ("big", "small", "undoer", "rerunner"):
        store.users.add(name, "annotator")
    store.queues.assign([str(broken.id)], ["rerunner"], overlap=1)
    assert str(broken.id) in set(failed_frame(Workspace(root))["id"].astype(str))
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, store, str(broken.id)
    finally:
        server.stop()
        store.close()


def sign_in(browser: Browser, server: StreamlitServer, name: str,
            viewport: ViewportSize) -> Page:
    return local_sign_in(browser, server, name, "annotate",
                         {"width": viewport["width"], "height": viewport["height"]})


def take(page: Page) -> None:
    page.get_by_role("button", name=re.compile(r"^Take 25 unassigned failures")).click()
    wait_idle(page)
    expect(page.get_by_text(re.compile(r"Item 1 of \d+ · 0 labelled"))).to_be_visible(
        timeout=30_000)


def inside(loc: Locator, viewport: ViewportSize) -> None:
    expect(loc).to_be_visible()
    box = loc.bounding_box()
    assert box is not None, loc
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (loc, box)
    assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"], (loc, box)


@pytest.mark.parametrize(("user", "viewport"), [
    ("big", {"width": 1440, "height": 900}),
    ("small", {"width": 1280, "height": 800}),
], ids=["1440x900", "1280x800"])
def test_everything_acted_on_is_on_screen(browser: Browser,
                                          screen: tuple[StreamlitServer, Store, str],
                                          user: str, viewport: ViewportSize) -> None:
    server, _, _ = screen
    page = sign_in(browser, server, user, viewport)
    take(page)
    page.evaluate("window.scrollTo(0, 0)")
    for name in (r"^Accept pre-label", r"^Skip", r"^Undo", r"^Semantic Misunder",
                 r"^Medical-Code Look", r"^SQL Logic Error", r"^Variable Scope Error",
                 r"^Answer Format Error", r"^Stuck-in-Loop", r"^Re-run$"):
        inside(page.get_by_role("button", name=re.compile(name)).first, viewport)
    inside(page.get_by_label("Note", exact=True).and_(page.locator("textarea")), viewport)
    inside(page.get_by_label("First faulty step", exact=True).first, viewport)
    for text in ("Answer vs truth", "Reference SQL"):
        inside(page.get_by_text(text, exact=True).first, viewport)
    inside(page.locator(".st-key-annotate_answer .faillab-diff").first, viewport)
    # The evidence is one line at the top of the steps pane, whether it decides or not.
    evidence = page.locator(".st-key-annotate_steps_pane [class*='st-key-evidence_']").first
    inside(evidence, viewport)
    # When the evidence names a part, the line is an expander whose icon's name ("search")
    # comes first in its text; which kind the first item shows depends on the pre-labels.
    assert evidence.inner_text().removeprefix("search").lstrip().startswith("Evidence")
    box = evidence.bounding_box()
    pane = page.locator(".st-key-annotate_steps_pane").first.bounding_box()
    assert box is not None and pane is not None and box["height"] < 80, box
    # Every control's text whole: at 1280 px two category names ended in "…".
    assert cut_controls(page) == []
    screenshot(page, f"annotate-{viewport['width']}x{viewport['height']}")
    page.context.close()


def test_undo_retracts_the_label_and_reopens_the_item(
        browser: Browser, screen: tuple[StreamlitServer, Store, str]) -> None:
    server, store, _ = screen
    page = sign_in(browser, server, "undoer", {"width": 1280, "height": 800})
    take(page)
    defaults = Settings.from_env({})
    first = store.queues.next_items("undoer", prelabel_threshold=defaults.prelabel_threshold,
                                    spot_check_share=defaults.spot_check_share)[0]
    expect(page.get_by_text(first).first).to_be_visible()
    # Keys work right after the mouse click on Take (the focus left the clicked button).
    page.keyboard.press("3")
    wait_idle(page)
    expect(page.get_by_text(re.compile(r"Item 2 of \d+ · 1 labelled"))).to_be_visible()
    assert {p.annotator: p.done for p in store.queues.progress()}["undoer"] == 1

    page.keyboard.press("z")  # Z undoes like U
    wait_idle(page)
    expect(page.get_by_text(re.compile(r"Item 1 of \d+ · 0 labelled · 0 skipped"))
           ).to_be_visible()
    expect(page.get_by_text(first).first).to_be_visible()
    expect(page.get_by_text("Undone: your label SQL Logic Error")).to_be_visible()
    assert {p.annotator: p.done for p in store.queues.progress()}["undoer"] == 0
    assert store.labels.for_item(first, viewer=None, blind=False, include_llm=False) == []
    assert store.queues.next_items("undoer", prelabel_threshold=defaults.prelabel_threshold,
                                   spot_check_share=defaults.spot_check_share)[0] == first
    [(label, by, _)] = store.labels.retracted(first)
    assert (label.category, by) == ("sql_logic_error", "undoer")
    expect(page.get_by_role("button", name=re.compile(r"^Undo"))).to_be_disabled()
    page.context.close()


def test_rerun_error_is_told_apart_from_the_recorded_error(
        browser: Browser, screen: tuple[StreamlitServer, Store, str]) -> None:
    server, _, broken = screen
    page = sign_in(browser, server, "rerunner", {"width": 1440, "height": 900})
    expect(page.get_by_text(broken).first).to_be_visible()
    pane = page.locator(".st-key-annotate_steps_pane")
    # Its evidence decides (the agent read another table): one line, the reason on expand.
    line = pane.locator("[class*='st-key-evidence_']:has([data-testid='stExpander'])").first
    expect(line).to_be_visible()
    assert "first divergence at step 1" in line.inner_text()
    box = line.bounding_box()
    assert box is not None and box["height"] < 80, box
    line.locator("summary").click()
    wait_idle(page)
    # The reason names the table the agent used and the reference's.
    expect(line.get_by_text(re.compile(r"no_such_table.*patients")).first).to_be_visible()
    expect(pane.get_by_text("Recorded error:")).to_be_visible()
    # Re-runs sit in one collapsed box above the steps, as on the Trajectory page.
    pane.get_by_text(re.compile(r"^Re-run a step's SQL")).click()
    wait_idle(page)
    pane.locator(f".st-key-rerun_btn_annotate_{broken}_1 button").click()
    wait_idle(page)
    rerun_error = pane.get_by_text(re.compile(r"^Re-run error"))
    expect(rerun_error).to_be_visible()
    expect(pane.get_by_text("Recorded error:")).to_be_visible()  # both, each named
    screenshot(page, "annotate-rerun-error")
    page.context.close()


@pytest.mark.slow
def test_make_run_serves_a_demo_with_prelabels(browser: Browser,
                                                tmp_path: Path) -> None:
    """`make run` builds the demo with offline pre-labels, so Annotate shows them."""
    root = tmp_path / "ws"
    port = free_port()
    log = tmp_path / "make-run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"WORKSPACE={root}", f"PORT={port}",
             "DEMO_ARGS=--tasks 6 --rollouts 1 --patients 200"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
        try:
            wait_for_health(f"http://127.0.0.1:{port}", proc, log, 300)
            store = open_store(Settings.from_env({}, workspace=root).annotations_url())
            try:
                assert store.prelabels.opinions(), log.read_text()
                store.users.add("maker", "annotator")
            finally:
                store.close()
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.goto(f"http://127.0.0.1:{port}/annotate")
            wait_idle(page)
            field = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
            field.fill("maker")
            field.press("Enter")
            wait_idle(page)
            page.get_by_role("button", name=re.compile(r"^Take 25 unassigned failures")).click()
            wait_idle(page)
            # The demo's pre-labels are the offline heuristic's, and say so.
            expect(page.get_by_text("Pre-label (heuristic):").first).to_be_visible(
                timeout=30_000)
            page.context.close()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
