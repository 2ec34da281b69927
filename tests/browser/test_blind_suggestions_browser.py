"""Blind everywhere, in Chromium: with the pre-label hidden until commit, an annotator sees no
automatic opinion (the evidence finder's suggested category) on the Trajectory page or the
Clusters page before labelling the item; a lead does, and so does the annotator afterwards. A
cluster decision on items not assigned to an annotator is refused, and nothing is stored."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from faillab_core.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from taxonomy import default_taxonomy
from tests.browser.support import StreamlitServer, local_sign_in, wait_idle
from trajectories.evidence import find_divergence
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1440, "height": 900}


@pytest.fixture(scope="module")
def blind_server(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[tuple[StreamlitServer, Store, str]]:
    root = tmp_path_factory.mktemp("blindsuggest") / "ws"
    shutil.copytree(demo_workspace, root)
    ws = Workspace(root)
    # A failure on which the evidence finder names a category (on the demo's EHR, as the page).
    suggested = next(str(t) for t in failed_frame(ws)["id"]
                     if (traj := ws.get(str(t))) is not None
                     and find_divergence(traj, ws.ehr_path).category is not None)
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    for name in ("ada", "bea"):
        store.users.add(name, "annotator")
    store.users.add("lee", "lead")
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": "",
                                        "FAILLAB_BLIND": "true", "FAILLAB_HIDE_PRELABEL": "1"})
    try:
        yield server, store, suggested
    finally:
        server.stop()
        store.close()


def as_person(browser: Browser, server: StreamlitServer, name: str, path: str) -> Page:
    return local_sign_in(browser, server, name, path, VIEWPORT)


def main_text(page: Page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def test_trajectory_page_shows_the_suggestion_only_to_whom_the_store_allows(
        browser: Browser, blind_server: tuple[StreamlitServer, Store, str]) -> None:
    server, store, tid = blind_server
    ada = as_person(browser, server, "ada", f"trajectory?id={tid}")
    expect(ada.get_by_text("Evidence · first divergence", exact=False).first).to_be_visible(
        timeout=30_000)
    assert "suggests" not in main_text(ada)
    lee = as_person(browser, server, "lee", f"trajectory?id={tid}")
    expect(lee.get_by_text("suggests", exact=False).first).to_be_visible(timeout=30_000)
    # Once ada has committed a label on the item, the opinion is hers to see.
    store.labels.add(tid, "sql_logic_error", annotator="ada",
                     taxonomy_version=default_taxonomy().version)
    ada.reload()
    wait_idle(ada)
    expect(ada.get_by_text("suggests", exact=False).first).to_be_visible(timeout=30_000)
    for page in (ada, lee):
        page.context.close()


def test_clusters_page_hides_item_and_cluster_suggestions_before_commit(
        browser: Browser, blind_server: tuple[StreamlitServer, Store, str]) -> None:
    server, _, _ = blind_server
    # bea has labelled nothing (ada labels an item above).
    bea = as_person(browser, server, "bea", "clusters")
    expect(bea.get_by_text("suggestions are hidden until you label", exact=False).first
           ).to_be_visible(timeout=120_000)
    assert "Suggested by the evidence finder" not in main_text(bea)
    lee = as_person(browser, server, "lee", "clusters")
    expect(lee.get_by_text("Suggested by the evidence finder", exact=False).first
           ).to_be_visible(timeout=120_000)
    for page in (bea, lee):
        page.context.close()


def test_an_annotator_is_refused_a_cluster_decision_on_items_not_theirs(
        browser: Browser, blind_server: tuple[StreamlitServer, Store, str]) -> None:
    server, store, _ = blind_server
    bea = as_person(browser, server, "bea", "clusters")  # nothing is assigned to bea
    try:
        form = bea.locator("[data-testid='stForm']").first
        form.wait_for(timeout=120_000)
        form.locator("[data-testid='stSelectbox']").click()
        bea.get_by_role("option", name="SQL Logic Error").click()
        before = len([lab for lab in store.labels.all() if lab.annotator == "bea"])
        form.get_by_role("button", name=re.compile(r"^Label \d+ items")).click()
        wait_idle(bea, 60_000)
        expect(bea.locator("[data-testid='stAlertContentError']")).to_contain_text(
            "not assigned", timeout=30_000)
        assert len([lab for lab in store.labels.all() if lab.annotator == "bea"]) == before
    finally:
        bea.context.close()
