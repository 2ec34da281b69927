"""Every real tau-bench trajectory (simulated user, schema look-ups, tool errors) renders on the
Trajectory page without an error, and its SQL re-runs against the EHRSQL database."""

from __future__ import annotations

import html
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import EHRSQL_SQLITE, REPO, ImportedWorkspace, require_shared
from trajectories.model import StepKind
from trajectories.workspace import Workspace


@pytest.fixture(scope="module")
def real_with_ehr(real_workspace: ImportedWorkspace,
                  tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """A copy of the session's workspace of every real log, given the EHRSQL database."""
    root = tmp_path_factory.mktemp("real") / "ws"
    shutil.copytree(real_workspace.root, root)
    ws = Workspace(root)
    ws.set_ehr_database(require_shared(EHRSQL_SQLITE))
    return ws


@pytest.mark.slow
def test_every_real_trajectory_renders(real_with_ehr: Workspace,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(real_with_ehr.root))
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    rows = real_with_ehr.list()
    assert len(rows) == 165
    for row in rows:
        at.switch_page("views/trajectory.py")
        at.query_params["id"] = row["id"]
        at.run()
        assert not at.exception, (row["id"], at.exception)
        traj = real_with_ehr.get(row["id"])
        assert traj is not None
        blocks = "".join(h.value for h in at.html)  # each step one escaped HTML block
        assert all(html.escape(s.code or "") in blocks for s in traj.steps
                   if s.kind == StepKind.SQL)


def test_real_sql_steps_rerun_against_ehrsql(real_with_ehr: Workspace,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(real_with_ehr.root))
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    # A trajectory whose first SQL step succeeded when the agent ran it.
    for row in real_with_ehr.list():
        traj = real_with_ehr.get(row["id"])
        assert traj is not None
        ok = [i for i, s in enumerate(traj.steps) if s.kind == StepKind.SQL and not s.error]
        if ok:
            break
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = row["id"]
    at.session_state[f"rerun_steps_{row['id']}"] = True  # the steps' re-run box, opened
    at.run()
    at.button(key=f"rerun_btn_{row['id']}_{ok[0]}").click().run()
    assert not at.exception
    assert not at.error or all("refused" not in e.value for e in at.error)
    assert any("Re-run against mimic_iv.sqlite" in c.value for c in at.caption)
