"""An EHRSQL-2024 submission imported as the benchmark's files are: executed in the sandbox at the
benchmark's clock, judged by the ehrsql-2024 profile, with the scorer's own outcomes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from tests.support import EHRSQL_SQLITE, SHARED_DATA, require_shared
from trajectories.importers.ehrsql_submission import (
    is_benchmark_task_file,
    is_submission,
    load_benchmark,
    read_submission,
)
from trajectories.judge import Method, Verdict, judge_trajectory, sandbox_executor
from trajectories.workspace import Workspace

TEST_SPLIT = SHARED_DATA / "ehrsql-2024" / "mimic_iv" / "test"
# Real test questions: two whose gold SQL reads the clock ("this year", "today"), two without
# an answer, and one ordinary.
THIS_YEAR = "d704f27fd79c99e4a27f1581"
TODAY = "6daa9b7fb20a9577136bb303"
NO_ANSWER = ("0d5b08f215c0f49d3d686ccf", "a653f5f014d75c59b11d207c")
ORDINARY = "905bf1d8d8b2ee5cc48396ca"


@pytest.fixture(scope="module")
def split() -> Path:
    return require_shared(TEST_SPLIT / "data.json")


def _prediction(tmp_path: Path) -> Path:
    labels = json.loads((TEST_SPLIT / "label.json").read_text())
    prediction = {
        THIS_YEAR: labels[THIS_YEAR],              # the gold itself: right only at 2100
        TODAY: labels[TODAY].replace("current_time", "'2100-12-30 00:00:00'"),  # a day off
        NO_ANSWER[0]: "null",                      # a right abstention
        NO_ANSWER[1]: "SELECT 1 WHERE 0",          # answers (nothing) where none exists
        ORDINARY: "SELECT COUNT(*)>0 FROM no_such_table",  # fails: a wrong answer
        "not-a-test-id": "SELECT 1",               # its question is not in the split
    }
    path = tmp_path / "prediction.json"
    path.write_text(json.dumps(prediction))
    return path


def test_a_submission_is_read_executed_at_the_benchmarks_clock_and_judged(
        split: Path, tmp_path: Path) -> None:
    db = require_shared(EHRSQL_SQLITE)
    prediction = _prediction(tmp_path)
    assert is_submission(prediction) and is_benchmark_task_file(split)
    assert not is_submission(split)  # data.json is no submission
    read = read_submission(prediction, load_benchmark(split),
                           sandbox_executor(db, timeout_s=30.0), run="exp")
    assert read.no_task == ["not-a-test-id"]
    assert len(read.no_prediction) == 1167 - 5
    by_id = {t.task.id: t for t in read.trajectories}
    verdicts = {qid: judge_trajectory(t) for qid, t in by_id.items()}
    this_year = by_id[THIS_YEAR]
    assert (this_year.task.model_extra or {})["reference_time"] == "2100-12-31 23:59:00"
    assert this_year.final_answer == this_year.task.ground_truth
    assert this_year.final_answer[0][0] > 0  # the clock's year has rows
    assert verdicts[THIS_YEAR].verdict == Verdict.CORRECT
    assert "[profile ehrsql-2024]" in verdicts[THIS_YEAR].evidence
    assert verdicts[TODAY].verdict == Verdict.INCORRECT
    assert verdicts[NO_ANSWER[0]].verdict == Verdict.CORRECT
    assert (verdicts[NO_ANSWER[1]].verdict, verdicts[NO_ANSWER[1]].method) == \
        (Verdict.INCORRECT, Method.ABSTENTION)
    failed = by_id[ORDINARY]
    assert failed.steps[0].error and (failed.model_extra or {})["execution"] == "failed"
    assert verdicts[ORDINARY].verdict == Verdict.INCORRECT
    # Re-executing both queries in the sandbox gives the same verdicts.
    again = sandbox_executor(db, timeout_s=30.0)
    for qid, traj in by_id.items():
        assert judge_trajectory(traj, execute=again).verdict == verdicts[qid].verdict, qid


def test_faillab_import_takes_the_submission_with_the_benchmarks_files(
        split: Path, tmp_path: Path) -> None:
    db = require_shared(EHRSQL_SQLITE)
    ws = tmp_path / "ws"
    runner = CliRunner()
    result = runner.invoke(main, ["sandbox", "use", str(db), "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["import", str(_prediction(tmp_path)), "--tasks", str(split),
                                  "--workspace", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["imported"], out["left_out_no_task"]) == (5, 1)
    frame = Workspace(ws).frame().set_index("task_id")
    assert frame.loc[THIS_YEAR, "judge_verdict"] == "correct"
    assert frame.loc[NO_ANSWER[1], "judge_verdict"] == "incorrect"
    result = runner.invoke(main, ["verdicts", "judge", "--rerun-sql", "--workspace", str(ws),
                                  "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["correct"] == 2


def test_a_split_folder_without_labels_is_no_benchmark(tmp_path: Path, split: Path) -> None:
    folder = tmp_path / "test"
    folder.mkdir()
    shutil.copy(split, folder / "data.json")
    assert not is_benchmark_task_file(folder / "data.json")
    assert is_benchmark_task_file(split.parent)
