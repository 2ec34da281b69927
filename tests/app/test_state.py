"""The app's cached loaders follow the data: a rebuilt EHR file or new parts give fresh results."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import cast

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import REPO, make_trajectory
from trajectories.model import Run, Step, StepKind
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")


def _build_ehr(path: Path, women: int) -> None:
    # Written the way a rebuild writes it: a new file replaces the old one at the same path.
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    with sqlite3.connect(tmp) as con:
        con.execute("CREATE TABLE patients (subject_id INTEGER, gender TEXT)")
        con.executemany("INSERT INTO patients VALUES (?, ?)",
                        [(i, "F") for i in range(women)] + [(1000, "M")])
    con.close()
    os.replace(tmp, path)


def _shown_count(at: AppTest) -> int:
    frames = [df.value for df in at.dataframe]
    counts = [int(cast(int, f.iloc[0, 0])) for f in frames if list(f.columns) == ["women"]]
    assert len(counts) == 1, frames
    return counts[0]


def test_rebuilt_ehr_database_gives_fresh_rerun_results(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws").create()
    sql = "SELECT count(*) AS women FROM patients WHERE gender = 'F'"
    traj = make_trajectory(steps=[Step(kind=StepKind.SQL, code=sql, observation="[(3,)]")])
    traj = traj.with_id()
    ws.add([(traj, "state-test")])
    ehr = tmp_path / "ehr.sqlite"
    _build_ehr(ehr, women=3)
    ws.set_ehr_database(ehr)
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws.root))

    at = AppTest.from_file(MAIN, default_timeout=60).run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = traj.id
    at.session_state[f"rerun_steps_{traj.id}"] = True  # the steps' re-run box, opened
    at.run()
    assert not at.exception
    button = f"rerun_btn_{traj.id}_0"
    at.button(key=button).click().run()
    assert not at.exception
    assert _shown_count(at) == 3

    _build_ehr(ehr, women=5)
    # Same size on disk (SQLite pages), so only the time tells the files apart; make sure it
    # moves even on file systems with coarse timestamps.
    later = ehr.stat().st_mtime_ns + 2_000_000_000
    os.utime(ehr, ns=(later, later))
    at.button(key=button).click().run()
    assert not at.exception
    assert _shown_count(at) == 5


def test_new_parts_show_without_a_restart(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws").create()
    ws.add([(make_trajectory(), "one")])
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws.root))
    second = make_trajectory(final_answer=7, run=Run(name="run-b", model="m")).with_id()
    at = AppTest.from_file(MAIN, default_timeout=60).run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = second.id
    at.run()
    assert any("No trajectory with id" in e.value for e in at.error)
    ws.add([(second, "two")])  # another process imports while the app runs
    at.run()
    assert not at.exception
    assert not at.error
    at.switch_page("views/browse.py").run()
    assert "run-b" in at.multiselect(key="browse_runs").options


def test_the_page_s_rerun_says_the_time_a_clock_query_ran_at(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws").create()
    sql = "SELECT strftime('%Y', current_time) AS this_year"
    traj = make_trajectory(steps=[Step(kind=StepKind.SQL, code=sql, observation="[]")])
    traj = traj.with_id()
    ws.add([(traj, "clock-test")])
    ehr = tmp_path / "ehr.sqlite"
    _build_ehr(ehr, women=1)
    ws.set_ehr_database(ehr)
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws.root))

    at = AppTest.from_file(MAIN, default_timeout=60).run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = traj.id
    at.session_state[f"rerun_steps_{traj.id}"] = True
    at.run()
    at.button(key=f"rerun_btn_{traj.id}_0").click().run()
    assert not at.exception
    frames = [df.value for df in at.dataframe if list(df.value.columns) == ["this_year"]]
    assert [f.iloc[0, 0] for f in frames] == ["2100"]  # EHRSQL's year, not the machine's
    assert any("ran at 2100-12-31 23:59:00, the benchmark's clock" in c.value
               for c in at.caption)
