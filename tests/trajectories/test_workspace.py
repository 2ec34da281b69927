from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, make_trajectory
from trajectories.importers import ImportProblem
from trajectories.model import Outcome
from trajectories.workspace import Workspace


def write_native(path: Path, n: int, *, bad_line: int | None = None) -> Path:
    lines = []
    for i in range(n):
        rec = make_trajectory().model_dump(mode="json", exclude={"id"})
        rec["task"]["id"] = f"task-{i}"
        if bad_line is not None and i + 1 == bad_line:
            rec["steps"][0]["kind"] = "telepathy"
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_is_idempotent(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    src = write_native(tmp_path / "a.jsonl", 5)
    first = ws.import_files([src])
    second = ws.import_files([src])
    assert (first.imported, first.duplicates) == (5, 0)
    assert (second.imported, second.duplicates) == (0, 5)
    assert ws.summary()["trajectories"] == 5
    assert len(ws.part_files()) == 1


def test_invalid_record_rejects_whole_import(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.import_files([write_native(tmp_path / "good.jsonl", 2)])
    before = sorted(p.name for p in ws.root.rglob("*"))
    bad = write_native(tmp_path / "bad.jsonl", 4, bad_line=3)
    with pytest.raises(ImportProblem) as info:
        ws.import_files([write_native(tmp_path / "more.jsonl", 3), bad])
    assert "line 3" in str(info.value) and "steps.0.kind" in str(info.value)
    assert sorted(p.name for p in ws.root.rglob("*")) == before
    assert ws.summary()["trajectories"] == 2


def test_skip_invalid_keeps_good_records_and_writes_rejects(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    report = ws.import_files([write_native(tmp_path / "bad.jsonl", 4, bad_line=2)],
                             skip_invalid=True)
    assert (report.imported, report.rejected) == (3, 1)
    assert report.rejects_file is not None
    reject = json.loads(report.rejects_file.read_text().splitlines()[0])
    assert reject["location"] == "line 2" and "telepathy" in reject["record"]


def test_success_prefers_recorded_outcome_and_counts_disagreements(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    lenient = make_trajectory(final_answer=51, outcome=Outcome(success=True, reward=1.0))
    exact = make_trajectory(final_answer=52)
    wrong = make_trajectory(final_answer=7, outcome=Outcome(success=False, reward=0.0))
    ws.add([(t.with_id(), None) for t in (lenient, exact, wrong)])
    df = ws.frame().set_index("final_answer")
    assert bool(df.loc["51", "success"]) and not bool(df.loc["51", "exact_match"])
    assert bool(df.loc["52", "success"]) and bool(df.loc["52", "exact_match"])
    assert ws.summary() == {"trajectories": 3, "tasks": 1, "runs": 1, "failed": 1,
                            "unscored": 0, "needs_a_person": 1, "decided_by_people": 0,
                            "outcome_disagreements": 1}


def test_get_returns_the_stored_trajectory(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    traj = make_trajectory().with_id()
    ws.add([(traj, None)])
    assert traj.id is not None
    loaded = ws.get(traj.id)
    assert loaded is not None and loaded.model_dump() == traj.model_dump()
    assert ws.get("nope") is None


def test_get_many_reads_what_get_reads_in_one_scan(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    trajs = [make_trajectory(final_answer=str(i)).with_id() for i in range(5)]
    ws.add([(t, None) for t in trajs[:3]])
    ws.add([(t, None) for t in trajs[3:]])  # a second part file
    ids = [str(t.id) for t in trajs]
    got = ws.get_many([*ids, ids[0], "nope"])
    assert sorted(got) == sorted(ids)  # each once; the unknown id left out
    for tid in ids:
        one = ws.get(tid)
        assert one is not None and got[tid].model_dump() == one.model_dump()
    assert ws.get_many([]) == {}


def test_empty_workspace_reads_as_empty(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "nothing")
    assert ws.summary()["trajectories"] == 0
    assert ws.list() == []


def test_rescore_overlay(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.add([(make_trajectory().with_id(), None)])
    assert ws.write_scores() == {"scored": 1, "changed": 0, "kept": 0, "correct": 1,
                                 "incorrect": 0,
                                 "undecided": 0}
    assert bool(ws.frame()["exact_match"].iloc[0])


def test_real_trajectories_import_with_recorded_outcomes(
    tmp_path: Path, real_trajectory_files: list[Path]
) -> None:
    ws = Workspace(tmp_path / "ws")
    report = ws.import_files(real_trajectory_files)
    assert report.as_json() == {"imported": 165, "duplicates": 0, "rejected": 0,
                                 "replaced": 0}
    rewards = [r["reward"] for f in real_trajectory_files for r in json.loads(f.read_text())]
    summary = ws.summary()
    assert summary["trajectories"] == 165
    assert summary["failed"] == sum(1 for r in rewards if r < 1.0)
    # That harness scores leniently, so exact match disagrees with it on some trajectories.
    assert summary["outcome_disagreements"] > 0
    assert summary["runs"] == len(real_trajectory_files)


def test_reader_sees_consistent_data_while_another_process_imports(tmp_path: Path) -> None:
    ws_dir = tmp_path / "ws"
    sources = [write_native(tmp_path / f"s{i}.jsonl", 200) for i in range(1)]
    # Different task ids per file so every file adds rows.
    for i in range(1, 6):
        path = tmp_path / f"s{i}.jsonl"
        path.write_text(sources[0].read_text().replace('"task-', f'"f{i}-task-'))
        sources.append(path)
    script = (
        "import sys; from pathlib import Path; from trajectories.workspace import Workspace\n"
        "ws = Workspace(Path(sys.argv[1]))\n"
        "for p in sys.argv[2:]: ws.import_files([Path(p)])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(ws_dir), *map(str, sources)],
                            cwd=REPO)
    reader = Workspace(ws_dir)
    seen: list[int] = []
    deadline = time.time() + 60
    while proc.poll() is None and time.time() < deadline:
        count = reader.summary()["trajectories"]
        assert count % 200 == 0  # never half a part
        seen.append(count)
    assert proc.wait(timeout=60) == 0
    assert reader.summary()["trajectories"] == 1200
    assert seen == sorted(seen)


def test_progress_reports_records_within_a_file(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    calls: list[tuple[int, int, int]] = []
    ws.import_files([write_native(tmp_path / "big.jsonl", 2500)],
                    progress=lambda *args: calls.append(args))
    assert calls == [(0, 1, 1000), (0, 1, 2000), (1, 1, 2500)]


def test_summary_list_and_fetch_need_no_task_consensus(tmp_path: Path) -> None:
    from tests.support import write_native_run

    root = tmp_path / "ws"
    Workspace(root).import_files([write_native_run(tmp_path / "r1.jsonl", 5, run="r1")])
    fresh = Workspace(root)  # a CLI process: counts only
    counts = fresh.summary()
    listed = fresh.list()
    assert counts["trajectories"] == 5 and fresh.get(listed[0]["id"]) is not None
    assert fresh.queries.shared is None  # no full database (nor its task consensus) was built
    light = fresh.queries.light_database
    assert light is not None
    tables = {r[0] for r in light.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "task_consensus" not in tables
    # The same answers as the full database gives, and a new import is seen.
    full = Workspace(root)
    full.connect()
    assert full.summary() == counts and full.list() == listed
    fresh.import_files([write_native_run(tmp_path / "r2.jsonl", 3, run="r2")])
    assert fresh.summary()["trajectories"] == 8


def test_an_outcome_is_read_once_per_state_of_the_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Annotate asks an item's outcome on every key; in an object store each ask read every
    part over the network. It is kept until the data changes: another writer's import shows
    (an id unknown before is found), and the caller's copy is its own."""
    root = tmp_path / "ws"
    reader = Workspace(root)
    first, later = (make_trajectory(final_answer=7).with_id(),
                    make_trajectory(final_answer=52, task=make_trajectory().task.model_copy(
                        update={"id": "t2"})).with_id())
    reader.add([(first, None)])
    reads: list[str] = []
    real = reader.queries._outcomes_connection

    def counted() -> Any:
        reads.append("read")
        return real()

    monkeypatch.setattr(reader.queries, "_outcomes_connection", counted)
    outcome = reader.verdict_of(str(first.id))
    assert outcome is not None and outcome["exact_match"] is False
    outcome["exact_match"] = True  # the caller's copy
    assert [reader.verdict_of(str(first.id)) for _ in range(3)] == [
        {**outcome, "exact_match": False}] * 3
    assert len(reads) == 1
    assert reader.verdict_of(str(later.id)) is None  # not there yet
    Workspace(root).add([(later, None)])  # another writer (process) imports it
    found = reader.verdict_of(str(later.id))
    assert found is not None and found["exact_match"] is True
    assert reader.verdict_of(str(first.id)) == {**outcome, "exact_match": False}
