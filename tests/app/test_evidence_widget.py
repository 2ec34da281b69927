"""The evidence widget on the Trajectory page: the marked step and rows the sandbox returned."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labeling.queue import create_assignments
from labeling.store import Store
from taxonomy import default_taxonomy
from tests.app.test_annotate_page import env, open_page, save_prelabel, texts
from tests.support import REPO
from trajectories.evidence import Probe, find_divergence
from trajectories.workspace import Workspace

__all__ = ["env"]  # the Annotate page's fixture, used here

MAIN = str(REPO / "app" / "main.py")


def test_trajectory_page_shows_the_executed_evidence(
    demo_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(demo_workspace))
    ws = Workspace(demo_workspace)
    ehr = ws.ehr_path
    assert ehr is not None
    with Probe.open(ehr) as probe:
        decided = None
        for row in ws.list(failed=True)[:40]:
            traj = ws.get(row["id"])
            assert traj is not None
            found = find_divergence(traj, probe=probe)
            if found.part is not None:
                decided = (traj.id, found)
                break
    assert decided is not None
    tid, expected = decided
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = tid
    at.run()
    assert not at.exception
    box = next(h.value for h in at.html if "Evidence · first divergence" in h.value)
    assert f"first divergence at step <b>{expected.step}</b>" in box
    assert f"part <code>{expected.part}</code>" in box
    assert "reference result:" in box and "faillab-code" in box
    if expected.category:  # the suggestion reads as the category's name, not its key
        name = default_taxonomy().category(expected.category).name
        assert f"suggests {html.escape(name)} (" in box, box


def test_annotate_says_how_the_prelabel_step_stands_to_the_evidence(
        env: tuple[Workspace, Store]) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=1)
    [(tid, _, _)] = store.queues.assignments("ana")
    traj = ws.get(tid)
    assert traj is not None and ws.ehr_path is not None
    with Probe.open(ws.ehr_path) as probe:
        found = find_divergence(traj, probe=probe)
    assert found.step is not None and found.part is not None
    other = found.step + 1 if found.step + 1 < len(traj.steps) else found.step - 1
    save_prelabel(store, tid, "semantic_misunderstanding", 0.4, step=other)
    shown = texts(open_page("ana"))
    assert f"The evidence points at step {found.step} (part `{found.part}`)" in shown
    assert f"this pre-label names step {other}" in shown
    save_prelabel(store, tid, "semantic_misunderstanding", 0.4, step=found.step)
    assert f"Same step as the evidence (part `{found.part}`)." in texts(open_page("ana"))
