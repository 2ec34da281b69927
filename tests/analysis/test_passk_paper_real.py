"""The paper's Pass^k layout on the real ai612-student runs, against an independent count."""

from __future__ import annotations

import shutil
from math import comb
from pathlib import Path

import pytest

from analysis.passk import pass_k_paper
from analysis.sources import load_frame
from tests.support import ImportedWorkspace
from trajectories.workspace import Workspace


def test_paper_layout_matches_independent_pass_hat(real_workspace: ImportedWorkspace,
                                                   tmp_path: Path) -> None:
    # Every real log, from the session's import (copied: nothing here may touch the shared one).
    shutil.copytree(real_workspace.root, tmp_path / "ws")
    ws = Workspace(tmp_path / "ws")
    frame = load_frame(ws)
    table = pass_k_paper(frame)
    overall = table[(table["scope"] == "all") & (table["intent"] == "all")]
    assert len(overall) >= 1
    scored = frame[frame["success"].notna()]
    for row in overall.itertuples(index=False):
        runs = scored[scored["run"] == row.pass_hat_run]
        per_task = runs.groupby("task_id")["success"].agg(["size", "sum"])
        expected = sum(comb(int(c), 1) / comb(int(n), 1) for n, c in per_task.itertuples(
            index=False)) / len(per_task)
        assert row.pass_hat_1 == pytest.approx(expected)
