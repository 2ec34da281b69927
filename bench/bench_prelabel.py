"""Benchmark pre-labelling throughput.

Usage: ``python bench/bench_prelabel.py [--n 600 --concurrency 16 --latency 0.3]``.

Runs the real Gemini labeller (google-genai SDK) through the runner against the local fake
server, which answers every request after ``--latency`` seconds, over synthetic failed
trajectories; the figure is labels per second (target >= 40 at 300 ms and concurrency 16, whose
ideal is 16 / 0.3 = 53/s). Then times the heuristic labeller through the same runner, if it is
importable (target >= 1,000/s). Prints one JSON object. No network access is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opinions.prelabel.base import PrelabelKey, PrelabelRecord
from opinions.prelabel.llm_labeller import GeminiLabeller
from opinions.prelabel.protocol import SyncLabellerAdapter
from opinions.prelabel.runner import run_prelabels, run_prelabels_sync
from taxonomy import default_taxonomy
from tests.fake_gemini import FakeGemini
from trajectories.model import Run, Step, StepKind, Task, Trajectory

TABLES = ["labevents", "prescriptions", "diagnoses_icd", "chartevents", "admissions", "icustays"]


class MemoryStore:
    def __init__(self) -> None:
        self.records: dict[PrelabelKey, PrelabelRecord] = {}

    def get(self, key: PrelabelKey) -> PrelabelRecord | None:
        return self.records.get(key)

    def save(self, record: PrelabelRecord) -> None:
        self.records[record.key] = record


def synthetic_failures(n: int, seed: int = 0) -> list[Trajectory]:
    """Failed runs of varied shape: SQL errors, empty results, loops, wrong formats."""
    rng = random.Random(seed)
    out: list[Trajectory] = []
    for i in range(n):
        table = rng.choice(TABLES)
        steps: list[Step] = []
        for j in range(rng.randint(1, 8)):
            error = rng.random() < 0.3
            obs = (
                f'Error: column "{table}.valuenum_{j}" does not exist'
                if error
                else "\n".join(f"({k}, {rng.randint(0, 500)})" for k in range(rng.randint(0, 40)))
            )
            steps.append(
                Step(
                    kind=StepKind.SQL,
                    code=f"SELECT subject_id, COUNT(*) FROM {table} WHERE hadm_id = {i} "
                    f"GROUP BY subject_id LIMIT {j + 10}",
                    observation=obs,
                    error=error,
                )
            )
        steps.append(Step(kind=StepKind.MESSAGE, content=f"The answer is {rng.randint(0, 99)}."))
        out.append(
            Trajectory(
                task=Task(
                    id=f"bench-{i}",
                    question=f"How many distinct patients in {table} for admission {i}?",
                    intent=rng.choice(["Labs", "Medications", "Diagnoses", "Vitals"]),
                    scope=rng.choice(["patient", "population"]),
                    reference_sql=f"SELECT COUNT(DISTINCT subject_id) FROM {table}",
                    ground_truth=[rng.randint(0, 99)],
                    answer_format="a single integer",
                ),
                run=Run(name="bench", model="agent"),
                steps=steps,
                final_answer=[rng.randint(0, 99)],
            ).with_id()
        )
    return out


async def _gemini(
    trajectories: list[Trajectory], concurrency: int, latency: float
) -> dict[str, Any]:
    tax = default_taxonomy()
    with FakeGemini(latency_s=latency) as fake:
        labeller = GeminiLabeller(api_key="bench", base_url=fake.base_url, timeout_s=30)
        store = MemoryStore()
        t0 = time.perf_counter()
        stats = await run_prelabels(trajectories, labeller, tax, store, concurrency=concurrency)
        elapsed = time.perf_counter() - t0
        t1 = time.perf_counter()
        again = await run_prelabels(trajectories, labeller, tax, store, concurrency=concurrency)
        cached_elapsed = time.perf_counter() - t1
        await labeller.aclose()
        return {
            "n": len(trajectories),
            "concurrency": concurrency,
            "latency_s": latency,
            "seconds": round(elapsed, 3),
            "labels_per_s": round(stats.labelled / elapsed, 1),
            "ideal_labels_per_s": round(concurrency / latency, 1) if latency else None,
            "target_labels_per_s": 40,
            "labelled": stats.labelled,
            "failed": stats.failed,
            "calls": stats.calls,
            "server_requests": fake.request_count,
            "server_max_in_flight": fake.max_in_flight,
            "estimated_cost_usd_if_real": round(stats.estimated_cost_usd, 4),
            "rerun_calls": again.calls,
            "rerun_seconds": round(cached_elapsed, 3),
        }


def _heuristic(trajectories: list[Trajectory]) -> dict[str, Any]:
    try:
        from opinions.prelabel.heuristic import HeuristicLabeller
    except ImportError as e:
        return {"skipped": f"heuristic labeller not importable: {e}"}
    tax = default_taxonomy()
    labeller = SyncLabellerAdapter(HeuristicLabeller(tax))
    t0 = time.perf_counter()
    stats = run_prelabels_sync(trajectories, labeller, tax, MemoryStore())
    elapsed = time.perf_counter() - t0
    return {
        "n": len(trajectories),
        "seconds": round(elapsed, 3),
        "labels_per_s": round(stats.labelled / elapsed, 1) if elapsed else None,
        "target_labels_per_s": 1000,
        "labelled": stats.labelled,
        "failed": stats.failed,
        "calls": stats.calls,
    }


def _batch(trajectories: list[Trajectory]) -> dict[str, Any]:
    """Plan + submit, then collect, through the Batch API path (real SDK, fake server, a real
    workspace and SQLite label store in a temporary directory)."""
    import os
    import tempfile

    from labeling.store import open_store
    from opinions.prelabel.batch import advance_batch
    from opinions.prelabel.options import PrelabelOptions
    from trajectories.workspace import Workspace

    with tempfile.TemporaryDirectory() as tmp, FakeGemini(batch_polls=0) as fake:
        ws = Workspace(Path(tmp) / "ws").create()
        ws.add((t, "bench") for t in trajectories)
        store = open_store(ws.default_annotations_url)
        os.environ.update({"GEMINI_API_KEY": "bench", "GOOGLE_GEMINI_BASE_URL": fake.base_url})
        options = PrelabelOptions(labeller="gemini", model="gemini-2.5-flash", vertex=False,
                                  allow_external=True)
        try:
            t0 = time.perf_counter()
            first = advance_batch(ws, store, options)  # plans, submits, and (polls=0) collects
            elapsed = time.perf_counter() - t0
        finally:
            store.close()
        return {
            "n_failures": len(ws.list(failed=True)),
            "jobs": first.submitted_jobs,
            "seconds_plan_submit_collect": round(elapsed, 3),
            "labels_per_s": round(first.labelled / elapsed, 1) if elapsed else None,
            "labelled": first.labelled,
            "failed": first.failed,
            "estimated_cost_usd_if_real": round(first.estimated_cost_usd, 4),
            "server_batch_items": len(fake.batch_items),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--heuristic-n", type=int, default=5000)
    ap.add_argument("--batch-n", type=int, default=0,
                    help="Also time the Batch API path over N trajectories (0: skip).")
    args = ap.parse_args(argv)

    gemini = asyncio.run(_gemini(synthetic_failures(args.n), args.concurrency, args.latency))
    heuristic = _heuristic(synthetic_failures(args.heuristic_n, seed=1))
    ok = gemini["labels_per_s"] >= 40 and (
        "skipped" in heuristic or (heuristic["labels_per_s"] or 0) >= 1000
    )
    out: dict[str, Any] = {"gemini_fake": gemini, "heuristic": heuristic, "targets_met": ok}
    if args.batch_n:
        out["batch_fake"] = _batch(synthetic_failures(args.batch_n, seed=2))
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
