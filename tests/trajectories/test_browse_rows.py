"""Browse reads its own copy of the Browse columns sorted by run: the same rows and counts as
the trajectories view, rebuilt when the parts change, built once for all threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd

from tests.support import write_native_run
from trajectories.views import (
    BROWSE_COLUMNS,
    BrowseFilter,
    browse,
    browse_page,
    facets,
    overview_by_run,
)
from trajectories.workspace import Workspace


def _workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    ws.import_files([write_native_run(tmp_path / f"{run}.jsonl", 7, run=run)
                     for run in ("r1", "r2", "r3")])
    return ws


def test_browse_matches_the_trajectories_view(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    for flt in (BrowseFilter(), BrowseFilter(runs=["r2"]), BrowseFilter(runs=["r1", "r3"],
                                                                         limit=5),
                BrowseFilter(text="task-3"), BrowseFilter(success=True)):
        where, params = flt.where()
        expected = ws.connect().execute(
            f"SELECT {', '.join(BROWSE_COLUMNS)} FROM trajectories{where} "
            f"ORDER BY run, task_id, rollout, id LIMIT {flt.limit}", params).df()
        df, total = browse(ws, flt)
        assert len(expected) > 0
        pd.testing.assert_frame_equal(df[list(BROWSE_COLUMNS)], expected)
        count = ws.connect().execute(f"SELECT count(*) FROM trajectories{where}",
                                     params).fetchone()
        assert count is not None and total == count[0]
    page, total = browse_page(ws, BrowseFilter(runs=["r3"]), sort="task_id", descending=True,
                              offset=2, limit=3)
    assert total == 7 and list(page["task_id"]) == ["task-4", "task-3", "task-2"]


def test_browse_sees_a_new_import(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    assert facets(ws)["run"] == ["r1", "r2", "r3"]
    assert browse(ws, BrowseFilter())[1] == 21
    ws.import_files([write_native_run(tmp_path / "r4.jsonl", 2, run="r4")])
    assert browse(ws, BrowseFilter())[1] == 23
    assert facets(ws)["run"] == ["r1", "r2", "r3", "r4"]
    ws.remove(runs=["r1"])
    df, total = browse(ws, BrowseFilter())
    assert total == 16 and "r1" not in set(df["run"])


def test_threads_share_one_copy(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    totals: list[int] = []

    def read() -> None:
        totals.append(browse(ws, BrowseFilter(runs=["r1"]))[1])

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert totals == [7, 7, 7, 7]
    # One database for the process's threads, holding one Browse table.
    assert ws.queries.shared is not None and set(ws.queries.shared.tables) == {"browse_rows"}


def test_the_browse_table_is_built_in_the_background_once_a_workspace_is_opened(
        tmp_path: Path) -> None:
    _workspace(tmp_path)
    ws = Workspace(tmp_path / "ws")  # opened afresh, as the app does
    overview_by_run(ws)  # the first page: starts building the Browse table aside
    assert ws.warm_thread is not None
    ws.warm_thread.join(30)
    shared = ws.queries.shared
    assert shared is not None
    build = shared.tables["browse_rows"]
    assert build.built
    assert browse(ws, BrowseFilter(runs=["r2"]))[1] == 7
    assert shared.tables["browse_rows"] is build  # read, not built again


def test_an_import_in_this_process_rebuilds_the_browse_table_in_the_background(
        tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    assert browse(ws, BrowseFilter())[1] == 21
    first = ws.warm_thread
    ws.import_files([write_native_run(tmp_path / "r4.jsonl", 2, run="r4")])
    assert ws.warm_thread is not None and ws.warm_thread is not first
    ws.warm_thread.join(30)
    shared = ws.queries.shared
    assert shared is not None and shared.signature == ws.signature()
    assert shared.tables["browse_rows"].built
    assert browse(ws, BrowseFilter(runs=["r4"]))[1] == 2


def test_a_table_being_built_blocks_no_other_reader(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    ws.connect()
    shared = ws.queries.shared
    assert shared is not None
    release = threading.Event()

    def held(x: int) -> int:
        release.wait(30)
        return x

    shared.database.create_function("held_until_released", held)
    builder = ws.keep_warm("held", "SELECT held_until_released(1) AS x")
    assert builder is not None
    deadline = time.monotonic() + 30
    while "held" not in shared.tables and time.monotonic() < deadline:
        time.sleep(0.01)  # the builder has claimed the table (a second caller then waits)
    waiter_saw: list[int] = []
    waiter = threading.Thread(target=lambda: waiter_saw.append(
        ws.shared_table("held", "unused: built by the first caller")
        .execute("SELECT x FROM held").fetchall()[0][0]))
    waiter.start()
    try:
        # While the build is held: other threads' queries and another shared table go on.
        assert builder.is_alive()
        others: list[int] = []
        reader = threading.Thread(target=lambda: others.extend(
            [ws.summary()["trajectories"], browse(ws, BrowseFilter(runs=["r1"]))[1]]))
        reader.start()
        reader.join(30)
        assert others == [21, 7] and builder.is_alive() and waiter.is_alive()
    finally:
        release.set()
    builder.join(30)
    waiter.join(30)
    assert waiter_saw == [1]  # the second caller waited for the first build, did not redo it
