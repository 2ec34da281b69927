"""Throughput of the first-divergence finder on the real failures (failures per second).

Usage: .venv/bin/python bench/bench_evidence.py [TRAJECTORY_DIR]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from labeling.evidence import find_divergence
from trajectories.importers import read_file

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "ai612-student"


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    fails = [
        t
        for f in sorted(root.glob("*.json"))
        for _, t in read_file(f).trajectories
        if t.outcome is not None and t.outcome.reward is not None and t.outcome.reward < 1
    ]
    start = time.perf_counter()
    for t in fails:
        find_divergence(t)
    took = time.perf_counter() - start
    print(f"{len(fails)} failures in {took:.2f}s: {len(fails) / max(took, 1e-9):.0f} failures/s")


if __name__ == "__main__":
    main()
