"""Import benchmark: 50,000 generated trajectories of about 20 steps into a fresh workspace.

Target (issue: trajectory workspace): at most 60 s wall time and 2 GB peak memory on a 2-core
machine. Runs ``faillab import`` in a child process and reads its peak RSS from the kernel.

    .venv/bin/python bench/bench_import.py [--n 50000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import write_files


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--keep", type=Path, default=None,
                        help="Keep the workspace here (bench_viewer.py can reuse it).")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="faillab-bench-"))
    try:
        src = tmp / "src"
        t0 = time.perf_counter()
        files = write_files(src, args.n)
        gen_s = time.perf_counter() - t0
        size_mb = sum(f.stat().st_size for f in files) / 1e6
        ws = args.keep or (tmp / "ws")
        if ws.exists():
            shutil.rmtree(ws)
        t0 = time.perf_counter()
        # The same call `faillab import --json` makes, in a child so its peak RSS is its own.
        code = ("import json, sys; from pathlib import Path; "
                "from trajectories.workspace import Workspace; "
                "r = Workspace(Path(sys.argv[1])).import_files([Path(p) for p in sys.argv[2:]]); "
                "print(json.dumps(r.as_json()))")
        proc = subprocess.run([sys.executable, "-c", code, str(ws), *map(str, files)],
                              capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        result = {
            "trajectories": args.n,
            "input_mb": round(size_mb, 1),
            "generate_s": round(gen_s, 1),
            "import_wall_s": round(wall, 1),
            "import_peak_rss_mb": round(peak_kb / 1024, 1),
            "import_result": json.loads(proc.stdout),
            "parquet_mb": round(sum(p.stat().st_size for p in (ws / "trajectories").glob("*"))
                                / 1e6, 1),
            "targets": {"wall_s": 60, "peak_mb": 2048},
            "within_targets": wall <= 60 and peak_kb / 1024 <= 2048,
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
