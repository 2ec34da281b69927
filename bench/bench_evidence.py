"""Throughput of the first-divergence finder, executing in the SQL sandbox (failures per second).

Usage: .venv/bin/python bench/bench_evidence.py [TRAJECTORY_DIR] [EHR_DATABASE] [--workers N]

Defaults: the real ai612 failures (reward < 1) against the EHRSQL MIMIC-IV SQLite file from
../shared/data. Each worker process opens its own read-only sandbox session; failures are split
by task so a task's reference runs in one worker only. Parsing and result caches start empty.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from collections import Counter
from pathlib import Path

from trajectories.evidence import Evidence, Probe, find_divergence
from trajectories.importers import read_file
from trajectories.model import Trajectory

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_DIR = SHARED / "trajectories" / "ai612-student"
DEFAULT_DB = SHARED / "ehrsql-2024" / "mimic_iv.sqlite"


def _failures(root: Path) -> list[Trajectory]:
    return [
        t
        for f in sorted(root.glob("*.json"))
        for _, t in read_file(f).trajectories
        if t.outcome is not None and t.outcome.reward is not None and t.outcome.reward < 1
    ]


def _work(args: tuple[Path, list[Trajectory]]) -> tuple[list[Evidence], float, int]:
    db, chunk = args
    cpu = time.process_time()
    with Probe.open(db) as probe:
        found = [find_divergence(t, probe=probe) for t in chunk]
        return found, time.process_time() - cpu, probe.queries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("db", nargs="?", type=Path, default=DEFAULT_DB)
    parser.add_argument("--workers", type=int, default=2)
    opts = parser.parse_args()
    fails = _failures(opts.root)
    by_task: dict[str, list[Trajectory]] = {}
    for t in fails:
        by_task.setdefault(t.task.id, []).append(t)
    chunks: list[list[Trajectory]] = [[] for _ in range(max(opts.workers, 1))]
    for group in sorted(by_task.values(), key=len, reverse=True):
        min(chunks, key=len).extend(group)  # whole tasks per worker, balanced by count
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(len(chunks)) as pool:
        pool.map(abs, range(len(chunks)))  # start-up is not the finder's cost
        start = time.perf_counter()
        done = pool.map(_work, [(opts.db, c) for c in chunks])
        took = time.perf_counter() - start
    results = [e for part, _, _ in done for e in part]
    cpu = sum(c for _, c, _ in done)
    queries = sum(q for _, _, q in done)
    parts = Counter(e.part or "none" for e in results)
    decided = sum(e.category is not None for e in results)
    print(f"{len(fails)} failures, {len(chunks)} worker(s): {took:.2f} s, "
          f"{len(fails) / max(took, 1e-9):.1f} failures/s; {cpu:.2f} CPU s in the workers, "
          f"{queries} statements executed")
    print(f"load average {os.getloadavg()[0]:.1f} (1 min)")
    print(f"with a suggested category: {decided}; parts: {dict(parts.most_common())}")


if __name__ == "__main__":
    main()
