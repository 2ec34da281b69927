"""A person's verdict by key: Y on Annotate says the agent was right; the item leaves the queue
and the Statistics page counts it a success at once (people's verdicts win)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from analysis.sources import load_frame
from faillab_core.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from tests.browser.support import StreamlitServer, screenshot, wait_idle
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def setup(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[tuple[StreamlitServer, Store, Path, str]]:
    root = tmp_path_factory.mktemp("verdict") / "ws"
    shutil.copytree(demo_workspace, root)
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    store.users.add("lea", "lead")
    tid = str(failed_frame(Workspace(root))["id"].iloc[0])
    store.queues.assign([tid], ["lea"], overlap=1, double_share=0.0)
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_BLIND": "1",
                                        "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, store, root, tid
    finally:
        server.stop()
        store.close()


def run_rate(root: Path, tid: str, verdict: bool | None) -> str:
    """The item's run's overall success rate as the success table prints it."""
    frame = load_frame(Workspace(root))
    run = str(frame.loc[frame["id"] == tid, "run"].iloc[0])
    rows = frame[frame["run"] == run]
    success = rows["success"].astype("object")
    if verdict is not None:
        success = success.where(rows["id"] != tid, verdict)
    decided = success.dropna().astype(bool)
    return f"{decided.mean():.2f}"


def test_y_on_annotate_makes_the_failure_a_success_in_the_statistics(
        browser: Browser, setup: tuple[StreamlitServer, Store, Path, str]) -> None:
    server, store, root, tid = setup
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.goto(f"{server.url}/annotate")
    wait_idle(page)
    field = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
    field.fill("lea")
    field.press("Enter")
    wait_idle(page)
    expect(page.get_by_text(tid).first).to_be_visible()
    expect(page.get_by_role("button", name="Agent right")).to_be_visible()
    page.keyboard.press("y")
    wait_idle(page)
    expect(page.get_by_text("Your queue is empty")).to_be_visible()
    screenshot(page, "verdict-annotate-after-y")
    assert store.verdicts.effective() == {tid: True}

    page.goto(f"{server.url}/statistics")
    wait_idle(page)
    expect(page.get_by_text("Success source: verdict").first).to_be_visible()
    before, after = run_rate(root, tid, None), run_rate(root, tid, True)
    assert before != after
    table = page.locator("[data-testid='stHtml']", has_text="overall").first
    expect(table).to_contain_text(after)
    screenshot(page, "verdict-statistics")
