"""A task file names a task's reference time and scoring profile; the judge's re-execution runs
the agent's SQL at that time, not at the default clock."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trajectories.importers.tasks import apply_task, load_tasks
from trajectories.judge import Verdict, judge_trajectory, sandbox_executor
from trajectories.model import Run, Step, StepKind, Task, Trajectory

THIS_YEAR = ("SELECT count(*) FROM admissions WHERE strftime('%Y', admittime) = "
             "strftime('%Y', current_time)")


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "ehr.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE admissions (admittime TEXT)")
    con.executemany("INSERT INTO admissions VALUES (?)",
                    [("2099-05-01 10:00:00",), ("2100-02-01 10:00:00",),
                     ("2100-03-01 10:00:00",)])
    con.commit()
    con.close()
    return path


def _trajectory(tmp_path: Path, reference_time: str) -> Trajectory:
    tasks_csv = tmp_path / "tasks.csv"
    tasks_csv.write_text("id,question,gold_answer,gold_sql,reference_time,scoring_profile\n"
                         f't1,"How many admissions this year?",1,"{THIS_YEAR}",'
                         f"{reference_time},robustgym\n")
    # The agent ran the gold query; its log kept no readable result, so it is run again.
    traj = Trajectory(task=Task(id="t1", question="How many admissions this year?"),
                      run=Run(name="r", model="m"),
                      steps=[Step(kind=StepKind.SQL, code=THIS_YEAR, observation="(cut)")])
    return apply_task(traj, load_tasks(tasks_csv), tmp_path / "log.jsonl")


def test_the_task_files_time_is_the_one_the_sql_runs_at(tmp_path: Path) -> None:
    execute = sandbox_executor(_db(tmp_path), timeout_s=10.0)
    traj = _trajectory(tmp_path, "2099-12-31 23:59:00")
    task = traj.task.model_extra or {}
    assert (task["reference_time"], task["scoring_profile"]) == ("2099-12-31 23:59:00",
                                                                 "robustgym")
    judged = judge_trajectory(traj, execute=execute)
    assert judged.verdict == Verdict.CORRECT and "[profile robustgym]" in judged.evidence
    # Near miss: at the default clock (2100) the same query finds two admissions.
    at_default = judge_trajectory(_trajectory(tmp_path, ""), execute=execute)
    assert at_default.verdict == Verdict.INCORRECT


def test_a_malformed_time_is_refused_not_replaced(tmp_path: Path) -> None:
    execute = sandbox_executor(_db(tmp_path), timeout_s=10.0)
    traj = _trajectory(tmp_path, "last year")
    assert judge_trajectory(traj, execute=execute).verdict == Verdict.UNDECIDED
