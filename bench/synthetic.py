"""Fast synthetic native trajectories for benchmarks (not the demo: no SQL is executed)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


#: Real harness runs (tau-bench layout) replicated by ``write_real_layout``; read in place.
REAL_RUNS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trajectories" \
    / "ai612-student"


def _real_records(src: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every record of the real runs, with the file stem it came from."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(src.glob("*.json")):
        for rec in json.loads(path.read_text("utf-8")):
            out.append((path.stem, rec))
    if not out:
        raise SystemExit(f"{src}: no real trajectories found (is ../shared/data there?)")
    return out


def _perturbed(rec: dict[str, Any], copy: int) -> dict[str, Any]:
    """A replica whose content hash differs from every other one: the trial number and the
    last user message carry the replica number; everything else is the real record."""
    out = dict(rec)  # shallow: only what changes is copied
    out["trial"] = copy
    messages = list(out.get("messages") or [])
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, dict) and msg.get("role") == "user" \
                and isinstance(msg.get("content"), str):
            messages[i] = {**msg, "content": msg["content"] + f" (replica {copy})"}
            out["messages"] = messages
            break
    else:
        out["replica"] = copy
    return out


def write_real_layout(out_dir: Path, n: int, per_file: int = 1000,
                      src: Path | None = None) -> list[Path]:
    """``n`` trajectories in the tau-bench result layout (JSON lists of ``per_file`` records,
    harness file names), replicated from the real runs with perturbations that change every
    content hash. Generated at bench time; never committed."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for stem, rec in _real_records(src or REAL_RUNS):
        by_run.setdefault(stem, []).append(rec)
    runs = sorted(by_run.items())
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for k, start in enumerate(range(0, n, per_file)):
        stem, recs = runs[k % len(runs)]
        # The harness name with a timestamp of its own: each file is its own run.
        name = (stem.rsplit("_", 2)[0]
                + f"_{k % 12 + 1:02d}{k % 28 + 1:02d}{k // 3600:02d}{k // 60 % 60:02d}"
                + f"{k % 60:02d}_valid.json")
        batch = [_perturbed(recs[i % len(recs)], i)
                 for i in range(start, min(n, start + per_file))]
        path = out_dir / name
        path.write_text(json.dumps(batch, ensure_ascii=False), "utf-8")
        paths.append(path)
    return paths
