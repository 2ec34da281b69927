"""Benchmark the judge with re-execution: an EHRSQL-2024 submission imported and judged with
``faillab verdicts judge --rerun-sql`` (every prediction and gold query run again in the
sandbox, under the ehrsql-2024 profile).

Usage::

    python bench/bench_judge_rerun.py --prediction PATH/prediction.json \\
        [--tasks SPLIT_FOLDER] [--db mimic_iv.sqlite]

``--tasks`` is the folder with the benchmark's ``data.json``, ``label.json`` and
``answer.json`` (default: ../shared/data/ehrsql-2024/mimic_iv/test, v1.0.2, where 1,067 of a
1,167-question submission of the competition still match; the competition's own test files,
from the benchmark repository's history, match all 1,167). Target: 1,167 predictions judged
with ``--rerun-sql`` in <= 30 s on 2 cores. Prints one JSON object: the import's and the
judge's wall seconds and the verdict counts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "ehrsql-2024"
FAILLAB = [sys.executable, "-m", "faillab.cli"]


def _run(*args: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([*FAILLAB, *args], capture_output=True, text=True, check=False,
                          cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"faillab {' '.join(args)} failed: {done.stderr.strip()}")
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prediction", type=Path, required=True)
    parser.add_argument("--tasks", type=Path, default=SHARED / "mimic_iv" / "test")
    parser.add_argument("--db", type=Path, default=SHARED / "mimic_iv.sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        ws = str(Path(scratch) / "ws")
        _run("sandbox", "use", str(args.db), "--workspace", ws)
        import_s, out = _run("import", str(args.prediction), "--tasks", str(args.tasks),
                             "--workspace", ws, "--json")
        imported = json.loads(out)
        judge_s, out = _run("verdicts", "judge", "--rerun-sql", "--workspace", ws, "--json")
        judged = json.loads(out)
    print(json.dumps({
        "predictions_imported": imported["imported"],
        "left_out_no_task": imported["left_out_no_task"],
        "import_s": round(import_s, 2),
        "judge_rerun_sql_s": round(judge_s, 2),
        "judged": judged["scored"], "correct": judged["correct"],
        "incorrect": judged["incorrect"], "undecided": judged["undecided"],
    }))


if __name__ == "__main__":
    main()
