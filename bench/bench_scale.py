"""Workspace scale benchmark: a workspace of N trajectories (default 1,000,000) built by
successive imports of ``--batch`` generated native trajectories (short ones: ``--steps``), then
server-side timings of what the app asks of it.

Reports each import's wall time, the import process's peak RSS over all of them (bounded
memory: it must not grow with the workspace), the parts left after automatic compaction,
and the median of 5 warm calls (plus the first, cold, call) of ``summary()``, a Browse filter
(``trajectories.views.browse``) and a trajectory fetch (``Workspace.get``).

    .venv/bin/python bench/bench_scale.py [--n 1000000] [--batch 100000] [--steps 6]
    .venv/bin/python bench/bench_scale.py --replicate --n 1000000 --keep /tmp/ws-1m
    .venv/bin/python bench/bench_scale.py --queries-only /tmp/ws-1m [--warm]

``--replicate`` builds a read-timing workspace fast: 10,000 generated trajectories imported
once, their rows copied with fresh ids into more parts up to ``--n``, then compacted (as an
import's automatic compaction leaves them). ``--queries-only`` times an existing workspace
(compare two branches on the same files back to back); with ``--warm`` it times what the app
does on opening one instead: the Browse table built in the background while a summary runs.

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
    out, cpu = [], []
    for _ in range(6):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        out.append((time.perf_counter() - t0) * 1000); cpu.append((time.process_time() - c0) * 1000)
    # CPU of all the process's threads (DuckDB's included): steadier than wall under load.
    return {"cold_ms": round(out[0], 1), "warm_median_ms": round(statistics.median(out[1:]), 1),
            "warm_median_cpu_ms": round(statistics.median(cpu[1:]), 1)}
import resource
t0 = time.perf_counter(); ws.connect(); connect_ms = (time.perf_counter() - t0) * 1000
some = ws.connect().execute("SELECT id, run FROM parts USING SAMPLE 5 ROWS").fetchall()
flt = BrowseFilter(runs=[some[0][1]], success=False, limit=200)
ids = iter([r[0] for r in some] * 2)
cpu0 = time.process_time()
out = {
    "first_connect_ms": round(connect_ms, 1),
    "summary": timed(ws.summary),
    "browse_filter": timed(lambda: browse(ws, flt)),
    "fetch": timed(lambda: ws.get(next(ids))),
}
out["cpu_s"] = round(time.process_time() - cpu0, 2)
out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(out))
"""

# The app's way in: the workspace is opened and its first page asks for the Browse table in
# the background (trajectories.views.keep_browse_warm). Times a summary while that build runs
# (readers are not blocked), how long the build takes, and the first Browse once it is done.
_WARM = """
import json, sys, time
from pathlib import Path
from trajectories.views import BrowseFilter, browse, keep_browse_warm
from trajectories.workspace import Workspace
ws = Workspace(Path(sys.argv[1]))
t0 = time.perf_counter(); ws.connect(); connect_ms = (time.perf_counter() - t0) * 1000
some = ws.connect().execute("SELECT run FROM parts USING SAMPLE 1 ROWS").fetchall()
t_open = time.perf_counter()
keep_browse_warm(ws)
t1 = time.perf_counter(); ws.summary(); summary_ms = (time.perf_counter() - t1) * 1000
building = ws.warm_thread is not None and ws.warm_thread.is_alive()
assert ws.warm_thread is not None
ws.warm_thread.join()
ready_s = time.perf_counter() - t_open
t2 = time.perf_counter(); browse(ws, BrowseFilter(runs=[some[0][0]], success=False, limit=200))
print(json.dumps({"first_connect_ms": round(connect_ms, 1),
                  "summary_during_build_ms": round(summary_ms, 1),
                  "build_still_running_after_summary": building,
                  "browse_table_ready_s": round(ready_s, 2),
                  "first_browse_after_build_ms": round((time.perf_counter() - t2) * 1000, 1)}))
"""

_REPLICATE = """
import hashlib, sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from trajectories.rows import PART_OPTIONS, part_name
from trajectories.workspace import Workspace
ws = Workspace(Path(sys.argv[1])); n = int(sys.argv[2])
base = pa.concat_tables([pq.read_table(p) for p in ws.part_files()])
ids = base.column("id").to_pylist()
added = []
for k in range(1, -(-n // len(ids))):
    take = min(len(ids), n - k * len(ids))
    fresh = [hashlib.sha256(f"{i}-{k}".encode()).hexdigest()[:24] for i in ids[:take]]
    table = base.slice(0, take).set_column(0, "id", pa.array(fresh)).sort_by("id")
    path = ws.parts_dir / part_name()
    pq.write_table(table, path, **PART_OPTIONS)
    added.append(path)
ws.parts.publish(added)
print(ws.compact())
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--replicate", action="store_true")
    parser.add_argument("--queries-only", type=Path, default=None)
    parser.add_argument("--warm", action="store_true",
                        help="With --queries-only: time the background Browse build instead.")
    args = parser.parse_args()
    if args.queries_only:
        # -P (every child here): `python -c` would put the current directory first on the
        # import path, so a PYTHONPATH pointing at another checkout would be ignored.
        proc = subprocess.run([sys.executable, "-P", "-c", _WARM if args.warm else _QUERIES,
                               str(args.queries_only)],
                              capture_output=True, text=True, check=True)
        print(proc.stdout.strip().splitlines()[-1])
        return
    tmp = Path(tempfile.mkdtemp(prefix="faillab-scale-"))
    ws = args.keep or tmp / "ws"
    imports = []
    try:
        total = min(args.n, 10_000) if args.replicate else args.n
        batch = total if args.replicate else args.batch
        stream = iter_trajectories(total, seed=1, steps=args.steps)
        for start in range(0, total, batch):
            src = tmp / "src"
            src.mkdir(exist_ok=True)
            files = [src / f"batch-{start}-{k}.jsonl" for k in range(10)]
            handles = [f.open("w") for f in files]
            for i in range(min(batch, total - start)):
                rec = next(stream)
                rec["run"]["name"] = f"run-{(start + i) % 40}"  # 40 runs of 25,000
                handles[i % 10].write(json.dumps(rec) + "\n")
            for h in handles:
                h.close()
            proc = subprocess.run([sys.executable, "-P", "-c", _IMPORT, str(ws), *map(str, files)],
                                  capture_output=True, text=True, check=True)
            imports.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            shutil.rmtree(src)
            print(json.dumps(imports[-1]), file=sys.stderr)
        if args.replicate:
            subprocess.run([sys.executable, "-P", "-c", _REPLICATE, str(ws), str(args.n)],
                           check=True)
        proc = subprocess.run([sys.executable, "-P", "-c", _QUERIES, str(ws)],
                              capture_output=True, text=True, check=True)
        queries = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps({
            "trajectories": args.n, "steps": args.steps, "batch": batch,
            "replicated": args.replicate,
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
