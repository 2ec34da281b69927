"""Import benchmark: ``faillab import`` of N trajectories into a fresh workspace, in a child
process whose peak RSS is read from the kernel.

``--layout real`` (the default) builds the tau-bench result layout (JSON lists of 1,000
records, harness file names) by replicating ``../shared/data/trajectories/ai612-student`` with
perturbations that change every content hash; ``--layout synthetic`` writes ~20-step native
JSONL. Both are generated in a temporary directory at bench time and deleted afterwards.
``--reimport`` also times importing the same files again (every record a duplicate);
``--profile`` runs the import single-process under cProfile and prints where the time goes.

    .venv/bin/python bench/bench_import.py --n 50000 [--layout real] [--reimport] [--profile]

``--data DIR`` keeps the generated files there and reuses them on the next run, so two
versions of the code can be compared on the very same files (run one with ``PYTHONPATH``
pointing at the other checkout).

Targets (issue 14, 50,000 real-layout trajectories on 2 cores): <= 10 s wall, <= 1 GB peak
RSS, idempotent re-import <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import write_files, write_real_layout

# The same call `faillab import --json` makes, in a child so its peak RSS is its own.
_CHILD = """
import json, os, sys, threading, time
from pathlib import Path
from trajectories.workspace import Workspace
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
def tree():
    # Every process descended from this one (import workers come from a forkserver, so they
    # are grandchildren the kernel's RUSAGE_CHILDREN never sees): pid -> (rss bytes, cpu s).
    stats = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(pid)] = (int(fields[1]), int(fields[21]) * PAGE,
                               (int(fields[11]) + int(fields[12])) / TICK)
    mine, changed = {os.getpid()}, True
    while changed:
        changed = False
        for pid, (ppid, _, _) in stats.items():
            if ppid in mine and pid not in mine:
                mine.add(pid); changed = True
    return {pid: stats[pid][1:] for pid in mine if pid in stats}
def pss(pid):
    # Proportional set size: shared pages split between the processes sharing them.
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
peak = {"total": 0, "one": 0, "pss": 0}
cpu = {}
done = threading.Event()
sampler_cpu = [0.0]
def sample():
    while not done.is_set():
        sampler_cpu[0] = time.thread_time()  # this thread's own CPU: reported apart
        now = tree()
        peak["total"] = max(peak["total"], sum(r for r, _ in now.values()))
        peak["pss"] = max(peak["pss"], sum(pss(pid) for pid in now))
        peak["one"] = max([peak["one"], *(r for p, (r, _) in now.items() if p != os.getpid())])
        for pid, (_, c) in now.items():
            cpu[pid] = c
        time.sleep(0.1)
threading.Thread(target=sample, daemon=True).start()
t0 = time.perf_counter()
r = Workspace(Path(sys.argv[1])).import_files([Path(p) for p in sys.argv[3:]],
                                             workers=int(sys.argv[2]) or None)
wall = time.perf_counter() - t0
done.set()
me = os.times()
cpu[os.getpid()] = me.user + me.system
print(json.dumps({**r.as_json(), "wall": wall, "cpu": sum(cpu.values()) - sampler_cpu[0],
                  "cpu_main": cpu[os.getpid()] - sampler_cpu[0], "sampler_cpu": sampler_cpu[0],
                  "total_kb": peak["total"] // 1024, "worker_kb": peak["one"] // 1024,
                  "pss_kb": peak["pss"] // 1024,
                  "self_kb": __import__("resource").getrusage(0).ru_maxrss}))
"""

_PROFILE = """
import cProfile, json, pstats, sys
from pathlib import Path
from trajectories.workspace import Workspace
ws = Workspace(Path(sys.argv[1]))
cProfile.run("ws.import_files([Path(p) for p in sys.argv[2:]], workers=1)", sys.argv[1] + ".prof")
stats = pstats.Stats(sys.argv[1] + ".prof")
cum = {}
for (file, _, name), (_, _, _, ct, _) in stats.stats.items():
    cum[(Path(file).name, name)] = cum.get((Path(file).name, name), 0) + ct
def t(file, name):
    return cum.get((file, name), 0.0)
total = t("workspace.py", "import_files")
# Both import paths: the fast one (fast_chat documents, canonical_id) and the pydantic one.
hash_s = t("model.py", "with_id") + t("model.py", "canonical_id")
# Read, scans, orjson: a whole document, or a JSON list record by record (a generator: its
# time is summed over every resume).
parse_s = t("json_documents.py", "read_document") + t("json_documents.py", "list_records")
validate_s = t("detect.py", "iter_file") - parse_s - hash_s
score_s = t("rows.py", "score") + t("scoring.py", "score_values")
row_s = t("rows.py", "index_row") + t("rows.py", "document_row") - score_s
arrow_s = t("rows.py", "rows_table")
write_s = t("~", "<built-in method pyarrow._parquet.ParquetWriter.write_table>") or t(
    "core.py", "write_table") - arrow_s
buckets = {"parse JSON": parse_s, "normalise (+ validate on the pydantic path)": validate_s,
           "content hash": hash_s,
           "score": score_s, "row + payload JSON": row_s, "Arrow conversion": arrow_s,
           "Parquet write": t("core.py", "write_table")}
buckets["other"] = total - sum(buckets.values())
print(json.dumps({"profiled_total_s": round(total, 2),
                  "share": {k: f"{100 * v / total:.0f}%" for k, v in buckets.items()},
                  "seconds": {k: round(v, 3) for k, v in buckets.items()}}, indent=2))
stats.sort_stats("tottime").print_stats(15)
"""


def _import(ws: Path, files: list[Path], workers: int) -> dict[str, float]:
    t0 = time.perf_counter()
    # -P: `python -c` would put the current directory first on the import path, so a
    # before/after run with PYTHONPATH pointing at another checkout would import this one.
    proc = subprocess.run([sys.executable, "-P", "-c", _CHILD, str(ws), str(workers),
                           *map(str, files)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall"] = wall
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--layout", choices=("real", "synthetic"), default="real")
    parser.add_argument("--workers", type=int, default=0,
                        help="Import workers (0: the import's own default, one per core).")
    parser.add_argument("--reimport", action="store_true",
                        help="Also time a second import of the same files (all duplicates).")
    parser.add_argument("--profile", action="store_true",
                        help="Profile a single-process import instead of timing one.")
    parser.add_argument("--data", type=Path, default=None,
                        help="Keep the generated files in this folder and reuse them when they "
                             "are there (before/after runs on the very same files).")
    parser.add_argument("--keep", type=Path, default=None,
                        help="Keep the workspace here (bench_viewer.py can reuse it).")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="faillab-bench-"))
    try:
        src = args.data or (tmp / "src")
        t0 = time.perf_counter()
        files = sorted(src.glob("*")) if args.data and args.data.is_dir() else []
        if not files:
            files = (write_real_layout(src, args.n) if args.layout == "real"
                     else write_files(src, args.n))
        gen_s = time.perf_counter() - t0
        size_mb = sum(f.stat().st_size for f in files) / 1e6
        ws = args.keep or (tmp / "ws")
        if ws.exists():
            shutil.rmtree(ws)
        if args.profile:
            subprocess.run([sys.executable, "-P", "-c", _PROFILE, str(ws), *map(str, files)],
                           check=True)
            return
        first = _import(ws, files, args.workers)
        wall = first["process_wall"]
        peak_mb = first["pss_kb"] / 1024
        result: dict[str, object] = {
            "layout": args.layout,
            "trajectories": args.n,
            "files": len(files),
            "input_mb": round(size_mb, 1),
            "cores": os.cpu_count(),
            "generate_s": round(gen_s, 1),
            "import_wall_s": round(wall, 2),
            "import_inside_s": round(first["wall"], 2),
            "import_cpu_s": round(first["cpu"], 1),
            "import_cpu_s_main_process": round(first["cpu_main"], 1),
            "sampler_cpu_s_not_counted": round(first["sampler_cpu"], 1),
            "records_per_s": round(args.n / wall),
            "mb_per_s": round(size_mb / wall, 1),
            # Sampled every 100 ms over the importing process and its workers (a sum that counts
            # pages they share twice); the main process's own peak from the kernel.
            "peak_rss_mb_all_processes": round(first["total_kb"] / 1024, 1),
            "peak_pss_mb_all_processes": round(first["pss_kb"] / 1024, 1),
            "peak_rss_mb_main": round(first["self_kb"] / 1024, 1),
            "peak_rss_mb_one_worker": round(first["worker_kb"] / 1024, 1),
            "import_result": {k: first[k] for k in ("imported", "duplicates", "rejected")},
            "parquet_mb": round(sum(p.stat().st_size for p in (ws / "trajectories").glob("*"))
                                / 1e6, 1),
        }
        if args.reimport:
            again = _import(ws, files, args.workers)
            result["reimport_wall_s"] = round(again["process_wall"], 2)
            result["reimport_cpu_s"] = round(again["cpu"], 1)
            result["reimport_peak_pss_mb"] = round(again["pss_kb"] / 1024, 1)
            result["reimport_result"] = {k: again[k]
                                         for k in ("imported", "duplicates", "rejected")}
        if args.layout == "real":
            result["targets"] = {"wall_s": 10, "peak_mb": 1024, "reimport_s": 5}
            result["within_targets"] = wall <= 10 and peak_mb <= 1024 and (
                not args.reimport or float(str(result["reimport_wall_s"])) <= 5)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
