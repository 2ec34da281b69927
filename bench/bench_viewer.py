"""Viewer benchmark: server time of a Browse filter and of opening a trajectory with 50,000
trajectories in the workspace (target: at most 300 ms each).

Measures the domain calls the pages make and whole page runs through Streamlit's AppTest (which
executes the real page script in-process, so it is server time without the browser).

    .venv/bin/python bench/bench_import.py --keep /tmp/bench-ws   # builds the 50k workspace
    .venv/bin/python bench/bench_viewer.py --workspace /tmp/bench-ws
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trajectories.views import BrowseFilter, browse, facets, failure_neighbours  # noqa: E402
from trajectories.workspace import Workspace  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int = 7) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", type=Path, required=True)
    args = parser.parse_args()
    ws = Workspace(args.workspace)
    n = ws.summary()["trajectories"]
    some_id = ws.list(failed=True, limit=2000)[1234]["id"]
    flt = BrowseFilter(success=False, intents=["Labs", "Vitals"], text="question 1")
    results: dict[str, Any] = {"trajectories": n}
    ws.connect()  # first connection (view creation) happens once per server thread
    results["browse_filter"] = timed(lambda: browse(ws, flt))
    results["facets"] = timed(lambda: facets(ws))
    results["open_trajectory_get"] = timed(lambda: ws.get(some_id))
    results["prev_next_failure"] = timed(lambda: failure_neighbours(ws, some_id))

    from streamlit.testing.v1 import AppTest

    os.environ["FAILLAB_WORKSPACE"] = str(args.workspace)
    os.chdir(ROOT)
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60).run()
    at.switch_page("views/browse.py").run()

    def browse_page() -> None:
        at.switch_page("views/browse.py")
        at.session_state["browse_outcome"] = "failed"
        at.run()

    results["browse_page_run"] = timed(browse_page, repeat=5)
    at.query_params["id"] = some_id

    def trajectory_page() -> None:
        at.switch_page("views/trajectory.py")
        at.query_params["id"] = some_id
        at.run()
        assert not at.exception, at.exception

    results["trajectory_page_run"] = timed(trajectory_page, repeat=5)
    results["target_ms"] = 300
    results["within_target"] = all(
        v["median_ms"] <= 300 for k, v in results.items() if isinstance(v, dict))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
