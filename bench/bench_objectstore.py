"""Object-store workspace benchmark: the same real-layout trajectories imported into a local
workspace and into ``s3://`` parts on a local S3-compatible server (moto, from the dev extra,
on 127.0.0.1:8708), then the reads the app makes, timed on both (median of repeated runs).

The server is on loopback, so the figures show the client-side cost of going through pyarrow's
S3 client and Arrow datasets, not a real network's latency (add the round-trip time of your
object store per request: one manifest GET per page run, plus the part reads).

    .venv/bin/python bench/bench_objectstore.py --n 10000
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from synthetic import write_real_layout

from trajectories.objectstore import s3_filesystem
from trajectories.views import BrowseFilter, browse_page
from trajectories.workspace import Workspace

PORT = 8708


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm: builds the views once, as a long-lived server does
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=PORT, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{PORT}"
        import pyarrow.fs as pafs

        pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", region="us-east-1",
                          access_key="k", secret_key="s",
                          allow_bucket_creation=True).create_dir("bench")
        fs = s3_filesystem(endpoint=endpoint, region="us-east-1", access_key="k",
                           secret_key="s")
        with tempfile.TemporaryDirectory() as tmp:
            files = write_real_layout(Path(tmp) / "src", args.n)
            spaces = {"local": Workspace(Path(tmp) / "local", trajectories_url=""),
                      "s3": Workspace(Path(tmp) / "s3", trajectories_url="s3://bench/ws",
                                      filesystem=fs)}
            rows: dict[str, dict[str, float]] = {}
            for name, ws in spaces.items():
                start = time.perf_counter()
                ws.import_files(files, workers=2)
                result = {"import_s": time.perf_counter() - start}
                ids = [r["id"] for r in ws.list(limit=50)]
                failed = BrowseFilter(success=False)
                result["summary_ms"] = _median_ms(ws.summary, args.repeat)
                result["browse_ms"] = _median_ms(
                    lambda ws=ws, f=failed: browse_page(ws, f, limit=100), args.repeat)
                result["get_ms"] = _median_ms(
                    lambda ws=ws, ids=ids: [ws.get(i) for i in ids[:10]], args.repeat) / 10
                rows[name] = result
        print(f"{args.n} real-layout trajectories")
        print(f"{'':8}{'import s':>10}{'summary ms':>12}{'browse ms':>11}{'get ms':>9}")
        for name, r in rows.items():
            print(f"{name:8}{r['import_s']:>10.1f}{r['summary_ms']:>12.1f}"
                  f"{r['browse_ms']:>11.1f}{r['get_ms']:>9.1f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
