""""Hide the pre-label until I commit" holds with blind mode off: an annotator's Trajectory page
showed the hidden pre-label's category and the evidence finder's suggestion
("suggests SQL Logic Error (0.65)") once ``FAILLAB_BLIND=0``. The store decides; the page only
asks it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.queue import create_assignments
from labeling.store import Store, open_store
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord
from opinions.prelabel.heuristic import HeuristicLabeller
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace
from tests.support import REPO
from trajectories.evidence import Probe, find_divergence
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")
RATIONALE = "HIDDEN-PRELABEL-RATIONALE"


@pytest.fixture
def env(demo_workspace: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workspace, Store]]:
    root = copy_of(demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    monkeypatch.setenv("FAILLAB_BLIND", "0")
    monkeypatch.setenv("FAILLAB_HIDE_PRELABEL", "1")
    store = open_store(Settings.from_env().annotations_url())
    store.users.add("ana", "annotator")
    store.users.add("lea", "lead")
    yield Workspace(root), store
    store.close()
    st.cache_resource.clear()


def _item_with_a_suggestion(ws: Workspace) -> tuple[str, str]:
    """A failure on which the evidence finder suggests a category, and that category's name."""
    ehr = ws.ehr_path
    assert ehr is not None
    with Probe.open(ehr) as probe:
        for row in ws.list(failed=True)[:60]:
            traj = ws.get(row["id"])
            assert traj is not None
            found = find_divergence(traj, probe=probe)
            if found.category:
                return row["id"], default_taxonomy().category(found.category).name
    raise AssertionError("no failure of the demo has a suggested category")


def _page_text(user: str, tid: str) -> str:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state["identity_name"] = user
    at.run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = tid
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    parts = [h.value for h in at.html] + [m.value for m in at.markdown] + \
        [c.value for c in at.caption] + [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


def test_the_trajectory_page_hides_the_prelabel_and_its_suggestion_without_blind_mode(
        env: tuple[Workspace, Store]) -> None:
    ws, store = env
    tid, suggested = _item_with_a_suggestion(ws)
    category = default_taxonomy().category("sql_logic_error")
    store.prelabels.save(PrelabelRecord(
        PrelabelKey(tid, default_taxonomy().version, HeuristicLabeller.prompt_version,
                    "heuristic"),
        LabelResult(category=category.key, confidence=0.65, first_error_step=1,
                    rationale=RATIONALE, labeller="heuristic", labeller_version="1")))
    store.queues.assign([tid], ["ana"], overlap=1)

    annotator = _page_text("ana", tid)
    assert "suggests" not in annotator and RATIONALE not in annotator
    assert "(0.65)" not in annotator
    # A lead reviewing an item they do not label sees the suggestion: it is there to hide.
    lead = _page_text("lea", tid)
    assert f"suggests {suggested}" in lead.replace("&#x27;", "'")
    # Once ana commits on the item, the automatic opinions show to her too.
    store.labels.add(tid, category.key, annotator="ana",
                     taxonomy_version=default_taxonomy().version)
    st.cache_resource.clear()
    assert "suggests" in _page_text("ana", tid)


def _open(user: str, page: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state["identity_name"] = user
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _progress_lines(at: AppTest) -> list[str]:
    return [str(p.proto.text) for p in at.get("progress")]


def test_blind_annotators_see_no_counts_over_other_peoples_work(
        env: tuple[Workspace, Store], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, store = env
    monkeypatch.setenv("FAILLAB_BLIND", "1")
    monkeypatch.setenv("FAILLAB_HIDE_PRELABEL", "0")
    st.cache_resource.clear()
    store.users.add("ben", "annotator")
    create_assignments(store, ws, ["ana", "ben"], overlap=2, double_share=1.0, limit=2)
    [first, *_] = [tid for tid, who, _ in store.queues.assignments("ben") if who == "ben"]
    store.labels.add(first, "sql_logic_error", annotator="ben",
                     taxonomy_version=default_taxonomy().version)
    store.prelabels.save(PrelabelRecord(
        PrelabelKey(first, default_taxonomy().version, HeuristicLabeller.prompt_version,
                    "heuristic"),
        LabelResult(category="sql_logic_error", confidence=0.65, first_error_step=1,
                    rationale=RATIONALE, labeller="heuristic", labeller_version="1")))

    # Annotate: ana's own bar only; the lead sees both.
    ana = _progress_lines(_open("ana", "views/annotate.py"))
    assert ana and all(line.startswith("ana:") for line in ana), ana
    lead = _progress_lines(_open("lea", "views/annotate.py"))
    assert any(line.startswith("ben: 1 of") for line in lead), lead
    # Pre-label: the distribution of every pre-label is the lead's.
    ana_page = _open("ana", "views/prelabel.py")
    assert not [m for m in ana_page.markdown if m.value == "**Categories**"]
    assert any("leads and admins only" in c.value for c in ana_page.caption)
    lead_page = _open("lea", "views/prelabel.py")
    assert [m for m in lead_page.markdown if m.value == "**Categories**"]
