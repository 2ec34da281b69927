"""A lead settles audit disagreements with the keyboard in a real browser: B takes reviewer B's
invalid judgment with its reason, I on a task whose invalid review gave no reason asks for one
and saves nothing, 2 then saves it invalid for that reason, and V saves a valid verdict with
no reason asked (one key a decision, where four clicks were needed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from faillab_core.settings import Settings
from labeling.audit import candidate_pool, create_audit, plan_audit
from labeling.store import open_store
from tests.browser.support import (
    LOCAL_MODE,
    StreamlitServer,
    cut_controls,
    demo_with_people,
    local_sign_in,
    wait_idle,
)
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[tuple[StreamlitServer, str, list[str]]]:
    root, store = demo_with_people(demo_workspace, tmp_path_factory.mktemp("audit_adj_keys"),
                                   {"ana": "annotator", "ben": "annotator", "lea": "lead"})
    url = Settings.from_env({}, workspace=root).annotations_url()
    plan = plan_audit(candidate_pool(Workspace(root), ["sim-small/t0.0"]), n=4, seed=0)
    create_audit(store, plan, name="keys-audit", annotators=["ana", "ben"])
    tids = [c.task_id for c in plan.items]
    for tid, reason in ((tids[0], "code_granularity"), (tids[1], None), (tids[2], "other")):
        store.audits.record_judgment("keys-audit", tid, "ana", True)
        store.audits.record_judgment("keys-audit", tid, "ben", False, reason=reason)
    store.close()
    running = StreamlitServer(root, env=LOCAL_MODE)
    try:
        yield running, url, tids
    finally:
        running.stop()


def test_a_lead_decides_by_key(browser: Browser,
                               server: tuple[StreamlitServer, str, list[str]]) -> None:
    running, url, tids = server
    page = local_sign_in(browser, running, "lea", "audit-adjudicate",
                         {"width": 1280, "height": 800})
    expect(page.get_by_text("V valid: no reason needed", exact=False)).to_be_visible()
    assert cut_controls(page) == []
    page.keyboard.press("b")
    wait_idle(page)
    expect(page.get_by_text("I invalid: needs a reason code", exact=False)).to_be_visible()
    page.keyboard.press("i")
    wait_idle(page)
    expect(page.get_by_text("An invalid verdict needs a reason code")).to_be_visible()
    page.keyboard.press("2")
    wait_idle(page)
    page.keyboard.press("v")
    wait_idle(page)
    # The last save's rerun can start after wait_idle looked (on a loaded machine): wait for it.
    expect(page.get_by_text("Every disagreement has a verdict.")).to_be_visible(timeout=30_000)
    store = open_store(url)
    try:
        got = {v.task_id: (v.valid, v.reason, v.decided_by)
               for v in store.audits.adjudications("keys-audit")}
    finally:
        store.close()
    assert got == {tids[0]: (False, "code_granularity", "lea"),
                   tids[1]: (False, "cohort_unit", "lea"),
                   tids[2]: (True, "other", "lea")}
