"""The pre-labeller's category, step and reasoning on the Trajectory page, read through the
store's rule as Annotate reads it: an annotator in blind mode with the pre-label hidden until
commit sees only that one exists; a lead sees it with its rationale and how its step stands to
the evidence's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab.app.widgets.prelabel_reasoning import prelabel_line
from faillab_core.settings import Settings
from labeling.store import Store, open_store
from labeling.store.records import LabelResult, PrelabelKey, PrelabelRecord
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace
from tests.support import REPO
from trajectories.evidence import Probe, find_divergence
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")
RATIONALE = "TRAJECTORY-PRELABEL-RATIONALE: the agent joined on the wrong key"


@pytest.fixture
def env(demo_workspace: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workspace, Store]]:
    root = copy_of(demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    monkeypatch.setenv("FAILLAB_BLIND", "1")
    monkeypatch.setenv("FAILLAB_HIDE_PRELABEL", "1")
    store = open_store(Settings.from_env().annotations_url())
    store.users.add("ana", "annotator")
    store.users.add("lea", "lead")
    yield Workspace(root), store
    store.close()
    st.cache_resource.clear()


def _item_with_evidence(ws: Workspace) -> tuple[str, int]:
    """A failure on which the evidence names a diverging step, and that step."""
    ehr = ws.ehr_path
    assert ehr is not None
    with Probe.open(ehr) as probe:
        for row in ws.list(failed=True)[:60]:
            traj = ws.get(row["id"])
            assert traj is not None
            found = find_divergence(traj, probe=probe)
            if found.part is not None and found.step is not None:
                return row["id"], found.step
    raise AssertionError("no failure of the demo has evidence with a step")


def _page_text(user: str, tid: str) -> str:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state["identity_name"] = user
    at.run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = tid
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    parts = [h.value for h in at.html] + [m.value for m in at.markdown] + \
        [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts)


def test_blind_annotator_sees_no_prelabel_and_a_lead_sees_its_reasoning(
        env: tuple[Workspace, Store]) -> None:
    ws, store = env
    tid, evidence_step = _item_with_evidence(ws)
    other_step = evidence_step + 1
    category = default_taxonomy().category("sql_logic_error")
    store.prelabels.save(PrelabelRecord(
        PrelabelKey(tid, default_taxonomy().version, "heuristic-v1",
                    "heuristic"),
        LabelResult(category=category.key, confidence=0.65, first_error_step=other_step,
                    rationale=RATIONALE, labeller="heuristic", labeller_version="1")))
    store.queues.assign([tid], ["ana"], overlap=1)
    line = prelabel_line("heuristic", category.name, 0.65, other_step)

    annotator = _page_text("ana", tid)
    assert "TRAJECTORY-PRELABEL-RATIONALE" not in annotator
    assert line not in annotator and "confidence 0.65" not in annotator
    assert "A pre-label exists for this trajectory; it stays hidden" in annotator

    lead = _page_text("lea", tid)
    assert line in lead
    assert "TRAJECTORY\\-PRELABEL\\-RATIONALE" in lead  # escaped as literal text
    assert f"The evidence points at step {evidence_step}" in lead
    assert f"this pre-label names step {other_step}" in lead

    # Once ana labels the item, the store shows her the pre-label too.
    store.labels.add(tid, category.key, annotator="ana",
                     taxonomy_version=default_taxonomy().version)
    st.cache_resource.clear()
    assert line in _page_text("ana", tid)


def test_the_line_escapes_its_data() -> None:
    line = prelabel_line("x*y", "[a](http://e.invalid)", None, None)
    assert line == ("**Pre-label (x\\*y):** \\[a\\]\\(http\\:\\/\\/e\\.invalid\\) · "
                    "no step named")
