"""Workspace scale benchmark: a workspace of N trajectories (default 1,000,000) built by
successive imports of ``--batch`` generated native trajectories (short ones: ``--steps``), then
server-side timings of what the app asks of it.

Reports each import's wall time, the import process's peak RSS over all of them (bounded
memory: it must not grow with the workspace), the parts left after automatic compaction,
and the median of 5 warm calls (plus the first, cold, call) of ``summary()``, a Browse filter
(``trajectories.views.browse``) and a trajectory fetch (``Workspace.get``).

    .venv/bin/python bench/bench_scale.py [--n 1000000] [--batch 100000] [--steps 6]

Targets (issue 14): summary <= 200 ms, Browse filter and a fetch <= 100 ms server-side.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import iter_trajectories

_IMPORT = """
import json, resource, sys, time
from pathlib import Path
from trajectories.workspace import Workspace
ws = Workspace(Path(sys.argv[1]))
t0 = time.perf_counter()
r = ws.import_files([Path(p) for p in sys.argv[2:]])
print(json.dumps({**r.as_json(), "wall": time.perf_counter() - t0,
                  "parts": len(ws.part_files()),
                  "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "worker_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""

_QUERIES = """
import json, statistics, sys, time
from pathlib import Path
from trajectories.views import BrowseFilter, browse
from trajectories.workspace import Workspace
ws = Workspace(Path(sys.argv[1]))
def timed(fn):
    out = []
    for _ in range(6):
        t0 = time.perf_counter(); fn(); out.append((time.perf_counter() - t0) * 1000)
    return {"cold_ms": round(out[0], 1), "warm_median_ms": round(statistics.median(out[1:]), 1)}
some = ws.connect().execute("SELECT id, run FROM parts USING SAMPLE 5 ROWS").fetchall()
flt = BrowseFilter(runs=[some[0][1]], success=False, limit=200)
ids = iter([r[0] for r in some] * 2)
print(json.dumps({
    "summary": timed(ws.summary),
    "browse_filter": timed(lambda: browse(ws, flt)),
    "fetch": timed(lambda: ws.get(next(ids))),
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="faillab-scale-"))
    ws = args.keep or tmp / "ws"
    imports = []
    try:
        stream = iter_trajectories(args.n, seed=1, steps=args.steps)
        for start in range(0, args.n, args.batch):
            src = tmp / "src"
            src.mkdir(exist_ok=True)
            files = [src / f"batch-{start}-{k}.jsonl" for k in range(10)]
            handles = [f.open("w") for f in files]
            for i in range(min(args.batch, args.n - start)):
                rec = next(stream)
                rec["run"]["name"] = f"run-{(start + i) % 40}"  # 40 runs of 25,000
                handles[i % 10].write(json.dumps(rec) + "\n")
            for h in handles:
                h.close()
            proc = subprocess.run([sys.executable, "-c", _IMPORT, str(ws), *map(str, files)],
                                  capture_output=True, text=True, check=True)
            imports.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            shutil.rmtree(src)
            print(json.dumps(imports[-1]), file=sys.stderr)
        proc = subprocess.run([sys.executable, "-c", _QUERIES, str(ws)],
                              capture_output=True, text=True, check=True)
        queries = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps({
            "trajectories": args.n, "steps": args.steps, "batch": args.batch,
            "import_wall_s": [round(i["wall"], 1) for i in imports],
            "import_peak_rss_mb": round(max(max(i["self_kb"], i["worker_kb"])
                                            for i in imports) / 1024, 1),
            "parts": imports[-1]["parts"],
            "parquet_mb": round(sum(p.stat().st_size for p in (ws / "trajectories")
                                    .glob("*.parquet")) / 1e6, 1),
            "queries": queries,
            "targets_ms": {"summary": 200, "browse_filter": 100, "fetch": 100},
        }, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
