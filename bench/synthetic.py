"""Fast synthetic native trajectories for benchmarks (not the demo: no SQL is executed)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

INTENTS = ["Demographics", "Vitals", "Medications", "Cost", "Labs", "Diagnoses"]
TABLES = ["patients", "admissions", "labevents", "prescriptions", "diagnoses_icd", "chartevents"]


def trajectory(rng: random.Random, i: int, steps: int = 20) -> dict[str, object]:
    task = i // 4
    table = rng.choice(TABLES)
    truth = [[rng.randint(1, 500)] for _ in range(rng.randint(1, 5))]
    ok = rng.random() < 0.45
    out: list[dict[str, object]] = [
        {"kind": "message", "role": "user", "content": f"Question {task} about {table}?"}]
    for s in range(steps - 2):
        sql = (f"SELECT subject_id, count(*) FROM {table} WHERE itemid = {rng.randint(1, 9999)} "
               f"GROUP BY subject_id ORDER BY 2 DESC LIMIT {s + 5}")
        err = rng.random() < 0.15
        obs = ("Error: Binder Error: column not found" if err else
               json.dumps([[rng.randint(10000000, 19999999), rng.randint(1, 90)]
                           for _ in range(rng.randint(1, 12))]))
        out.append({"kind": "sql", "code": sql, "observation": obs, "error": err,
                    "duration_ms": round(rng.random() * 50, 2)})
    out.append({"kind": "message", "role": "assistant", "content": "Done."})
    return {
        "task": {"id": f"task-{task}", "question": f"Question {task}: how many rows in {table}?",
                 "intent": INTENTS[task % 6], "scope": "patient" if task % 2 else "population",
                 "template_id": f"tpl-{task % 97}",
                 "reference_sql": f"SELECT count(*) FROM {table}",
                 "ground_truth": truth, "answer_format": "rows", "split": "test"},
        "run": {"name": f"run-{i % 4}", "model": f"model-{i % 4}", "temperature": 0.0,
                "rollout": i % 4},
        "steps": out,
        "final_answer": truth if ok else [[0]],
    }


def iter_trajectories(n: int, seed: int = 0, steps: int = 20) -> Iterator[dict[str, object]]:
    rng = random.Random(seed)
    for i in range(n):
        yield trajectory(rng, i, steps)


def write_files(out_dir: Path, n: int, files: int = 10, seed: int = 0) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"bench-{k:02d}.jsonl" for k in range(files)]
    handles = [p.open("w") for p in paths]
    try:
        for i, rec in enumerate(iter_trajectories(n, seed)):
            handles[i % files].write(json.dumps(rec) + "\n")
    finally:
        for h in handles:
            h.close()
    return paths
