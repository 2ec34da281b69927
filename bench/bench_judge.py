"""Benchmark the judge's rule layers, and the LM Studio importer on real exports replicated.

Usage: ``python bench/bench_judge.py [--n 100000 --workers 2 --conversations 10000]``.

1. Judge speed (target: 100,000 trajectories in <= 30 s on 2 cores). The cases are the real
   development sets' (claude-sonnet-4's 100 prose answers and the ten LM Studio conversations,
   with their last SQL results) plus structured tau-bench answers, cycled to ``--n``; each
   worker process judges its share with ``judge_trajectory``. Prints wall seconds and
   trajectories per second.
2. LM Studio import (the issue's "10,000 conversations replicated at bench time"): the ten real
   exports are copied ``--conversations`` times in total into a scratch folder (each copy's
   name made unique, so every conversation is a new record) and imported with ``faillab
   import`` into a fresh workspace; wall seconds, and peak RSS of the importing process and its
   workers (``/usr/bin/time``-free: read from ``resource.getrusage`` of the children).

Needs ../shared/data (the real files). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import CLAUDE_ANSWERS, LMSTUDIO_SAMPLE, REAL_TRAJECTORIES, REPO
from trajectories.importers import read_file
from trajectories.importers.tasks import load_tasks
from trajectories.judge import judge_trajectory
from trajectories.model import Trajectory


def development_cases() -> list[Trajectory]:
    cases = [t for _, t in read_file(CLAUDE_ANSWERS).trajectories]
    tasks = load_tasks(LMSTUDIO_SAMPLE / "EHRSQL_benchmark.csv")
    cases += [read_file(p, tasks=tasks).trajectories[0][1]
              for p in sorted(LMSTUDIO_SAMPLE.glob("*.conversation.json"))]
    for path in sorted(REAL_TRAJECTORIES.glob("*.json"))[:2]:
        cases += [t for _, t in read_file(path).trajectories]
    return cases


def _judge_share(payloads: list[str]) -> int:
    for payload in payloads:
        judge_trajectory(Trajectory.model_validate_json(payload))
    return len(payloads)


def bench_judge(n: int, workers: int) -> dict[str, float]:
    cases = [t.model_dump_json() for t in development_cases()]
    work = [cases[i % len(cases)] for i in range(n)]
    shares = [work[i::workers] for i in range(workers)]
    # Parsing the JSON is part of what a re-judge pays (it reads payloads from the parts).
    start = time.perf_counter()
    with multiprocessing.get_context("forkserver").Pool(workers) as pool:
        done = sum(pool.map(_judge_share, shares))
    wall = time.perf_counter() - start
    return {"judged": done, "distinct_cases": len(cases), "workers": workers,
            "wall_s": round(wall, 2), "per_s": round(done / wall)}


def bench_lmstudio_import(conversations: int) -> dict[str, float]:
    sources = sorted(LMSTUDIO_SAMPLE.glob("*.conversation.json"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "exports"
        folder.mkdir()
        for i in range(conversations):
            source = sources[i % len(sources)]
            doc = json.loads(source.read_text("utf-8"))
            doc["name"] = f"{doc.get('name')} #{i}"  # a distinct conversation, a new record
            (folder / f"{i}.conversation.json").write_text(json.dumps(doc), "utf-8")
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "faillab.cli", "import", str(folder),
                               "--workspace", str(Path(tmp) / "ws"), "--json"],
                              cwd=REPO, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        report = json.loads(proc.stdout)
        shutil.rmtree(folder)
    return {"conversations": conversations, "imported": report["imported"],
            "runs": report["runs"], "wall_s": round(wall, 1),
            "peak_rss_children_mb": round(children.ru_maxrss / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--conversations", type=int, default=10_000)
    opts = parser.parse_args()
    result = {"judge": bench_judge(opts.n, opts.workers)}
    if opts.conversations:
        result["lmstudio_import"] = bench_lmstudio_import(opts.conversations)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
