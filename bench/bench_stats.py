"""Benchmark the analysis tables on a synthetic 100,000-trajectory workspace.

Usage: ``python bench/bench_stats.py [--runs 8 --tasks 3125 --rollouts 4 --repeat 3]``.
Prints one JSON object: sizes, seconds per table (best of ``--repeat``) and the total, which
should stay within the 3 s budget.

With ``--workspace DIR`` it times a real workspace instead (e.g. one built with
``faillab demo --workspace DIR --tasks 6250 --rollouts 2`` for 100k trajectories): loading the
trajectory frame and labels through ``analysis.sources`` plus computing every table, which is
what the Statistics page and ``faillab stats all`` do on a cold cache.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.success import INTENTS, SCOPES
from analysis.tables import all_tables

CATEGORIES = [
    "Semantic Misunderstanding",
    "Medical-Code Lookup Error",
    "SQL Logic Error",
    "Variable Scope Error",
    "Answer Format Error",
    "Stuck-in-Loop",
]
PROVENANCES = ["adjudicated", "human_agreed", "human_single", "llm_only"]


def synthetic_frame(
    n_runs: int = 8, n_tasks: int = 3125, n_rollouts: int = 4, seed: int = 0
) -> pd.DataFrame:
    """Trajectory table shaped like the workspace view, with run-level skill differences."""
    rng = np.random.default_rng(seed)
    # Task attributes are shared by every run, as in a real benchmark.
    task_intent = rng.choice(list(INTENTS), n_tasks)
    task_scope = rng.choice(list(SCOPES), n_tasks)
    task_difficulty = rng.normal(0.0, 1.0, n_tasks)
    # Consecutive task pairs form Clean/Noise pairs (the noise task is the odd one).
    pair_idx = np.arange(n_tasks) // 2
    variant = np.where(np.arange(n_tasks) % 2 == 0, "clean", "noise")
    noise_type = rng.choice(["record", "value", "query"], n_tasks).astype(object)
    noise_type[variant == "clean"] = None

    n = n_runs * n_tasks * n_rollouts
    run_i = np.repeat(np.arange(n_runs), n_tasks * n_rollouts)
    task_i = np.tile(np.repeat(np.arange(n_tasks), n_rollouts), n_runs)
    rollout = np.tile(np.arange(1, n_rollouts + 1), n_runs * n_tasks)
    skill = np.linspace(-1.0, 1.5, n_runs)[run_i]
    noise_penalty = np.where(variant[task_i] == "noise", 0.8, 0.0)
    logit = skill - task_difficulty[task_i] - noise_penalty + rng.normal(0, 0.7, n)
    success = logit > 0
    n_turns = np.clip(rng.poisson(6 + 3 * (task_scope[task_i] == "population")), 1, 50)
    return pd.DataFrame(
        {
            "id": [f"t{i:07d}" for i in range(n)],
            "run": np.array([f"run{r}" for r in range(n_runs)])[run_i],
            "model": np.array([f"model{r}" for r in range(n_runs)])[run_i],
            "temperature": np.where(run_i % 2 == 0, 0.0, 0.6),
            "rollout": rollout,
            "task_id": np.array([f"task{t}" for t in range(n_tasks)])[task_i],
            "intent": task_intent[task_i],
            "scope": task_scope[task_i],
            "pair_id": np.array([f"pair{p}" for p in pair_idx])[task_i],
            "noise_type": noise_type[task_i],
            "variant": variant[task_i],
            "n_steps": n_turns + 2,
            "n_turns": n_turns,
            "n_errors": rng.poisson(0.5, n),
            "recorded_success": success,
            "exact_match": success,
            "success": success,
        }
    )


def synthetic_labels(df: pd.DataFrame, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Final labels for every failed trajectory, and LLM-vs-human pairs for 2,000 of them."""
    rng = np.random.default_rng(seed)
    failed = df.loc[~df["success"], "id"].to_numpy()
    labels = pd.DataFrame(
        {
            "trajectory_id": failed,
            "category": rng.choice(CATEGORIES, len(failed)),
            "secondary_category": None,
            "first_error_step": rng.integers(0, 10, len(failed)),
            "provenance": rng.choice(PROVENANCES, len(failed), p=[0.05, 0.1, 0.15, 0.7]),
        }
    )
    sample = labels.sample(min(2000, len(labels)), random_state=seed)
    llm = sample["category"].to_numpy().copy()
    flip = rng.random(len(llm)) < 0.25
    llm[flip] = rng.choice(CATEGORIES, int(flip.sum()))
    pairs = pd.DataFrame(
        {
            "trajectory_id": sample["trajectory_id"].to_numpy(),
            "llm_category": llm,
            "human_category": sample["category"].to_numpy(),
        }
    )
    return labels, pairs


def bench_workspace(root: Path, repeat: int) -> dict[str, object]:
    """Seconds to load the frame (and labels, if the workspace has a store) and to compute
    every table, best of ``repeat``."""
    from analysis.sources import Inputs, compute_all, final_labels, labeller_pairs, load_frame
    from labeling.store import open_store
    from trajectories.workspace import Workspace

    ws = Workspace(root)
    has_store = (root / "annotations.sqlite").exists()
    store = open_store(ws.default_annotations_url) if has_store else None
    load_s, labels_s, tables_s = [], [], []
    inputs = Inputs(pd.DataFrame())
    for _ in range(max(1, repeat)):
        ws = Workspace(root)  # fresh DuckDB connection: measure a cold load each time
        t0 = time.perf_counter()
        frame = load_frame(ws)
        load_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        labels = final_labels(store) if store is not None else None
        pairs = labeller_pairs(store) if store is not None else None
        labels_s.append(time.perf_counter() - t0)
        inputs = Inputs(frame, labels, pairs)
        t0 = time.perf_counter()
        compute_all(inputs)
        tables_s.append(time.perf_counter() - t0)
    totals = [a + b + c for a, b, c in zip(load_s, labels_s, tables_s, strict=True)]
    return {
        "workspace": str(root),
        "n_trajectories": len(inputs.frame),
        "n_labels": 0 if inputs.labels is None else len(inputs.labels),
        "load_frame_seconds_best": round(min(load_s), 3),
        "load_labels_seconds_best": round(min(labels_s), 3),
        "tables_seconds_best": round(min(tables_s), 3),
        "total_seconds_best": round(min(totals), 3),
        "cpu_count": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=3125)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workspace", type=Path, default=None,
                        help="Time loading + tables on this real workspace instead.")
    args = parser.parse_args()
    if args.workspace is not None:
        print(json.dumps(bench_workspace(args.workspace, args.repeat), indent=2))
        return

    t0 = time.perf_counter()
    df = synthetic_frame(args.runs, args.tasks, args.rollouts)
    labels, pairs = synthetic_labels(df)
    build_s = time.perf_counter() - t0

    best: dict[str, float] = {}
    totals: list[float] = []
    # CPU time is reported next to wall time because a shared machine can inflate wall time
    # well beyond what the code itself costs.
    cpu: list[float] = []
    shapes: dict[str, list[int]] = {}
    for _ in range(max(1, args.repeat)):
        timings: dict[str, float] = {}
        cpu0 = time.process_time()
        tables = all_tables(df, labels, pairs=pairs, timings=timings)
        cpu.append(time.process_time() - cpu0)
        totals.append(sum(timings.values()))
        for name, secs in timings.items():
            best[name] = min(secs, best.get(name, float("inf")))
        shapes = {name: list(t.shape) for name, t in tables.items()}

    report = {
        "n_trajectories": len(df),
        "n_runs": args.runs,
        "n_tasks": args.tasks,
        "n_rollouts": args.rollouts,
        "n_labels": len(labels),
        "n_labeller_pairs": len(pairs),
        "build_seconds": round(build_s, 3),
        "table_seconds_best": {k: round(v, 4) for k, v in best.items()},
        "total_seconds_best_run": round(min(totals), 3),
        "total_seconds_worst_run": round(max(totals), 3),
        "cpu_seconds_best_run": round(min(cpu), 3),
        "within_3s_budget": min(totals) <= 3.0,
        "cpu_count": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "table_shapes": shapes,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
