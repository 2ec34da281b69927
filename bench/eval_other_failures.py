"""First faulty step and category of the finder and the heuristic on the shared real failures of
the other kinds: claude-sonnet-4's prose answers (no tool recorded) and the gpt-oss-20B
conversations on unanswerable questions, against the labels in tests/data/other_eval/.

    .venv/bin/python bench/eval_other_failures.py [--db ../shared/data/ehrsql-2024/mimic_iv.sqlite]

The files are read where they are (never copied). The claude answers are imported with the
product's importer; the unanswerable conversations (the harness's own JSON export) are read
into trajectories here (tool calls in order, then the final message), so the measurement does
not depend on an import mapping. A step of ``final`` is the final answer of
a trajectory that recorded no step: it agrees with a labeller that names no step for it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any

from labeling.agreement import cohens_kappa_from_labels
from opinions.learn import failed_trajectories
from opinions.prelabel.heuristic import FALLBACK_CONFIDENCE, HeuristicLabeller
from trajectories.model import Outcome, Run, Step, StepKind, Task, Trajectory

SHARED = Path("../shared/data/trajectories")
LABELS = Path("tests/data/other_eval/labels.csv")


def _tool_output(raw: Any) -> str:
    """The text of an MCP tool's output (a JSON list of text parts), else the raw value."""
    if isinstance(raw, str):
        try:
            parts = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(parts, list):
            return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
        return raw
    return json.dumps(raw)


def unanswerable_trajectories(folder: Path) -> dict[str, Trajectory]:
    """The conversations the people's verdicts call wrong, keyed by file name."""
    with (folder / "EHRSQL_benchmark_unanswerable.csv").open(encoding="utf-8") as fh:
        verdicts = {Path(r["Chat Conversation"]).name: r["Correct/Incorrect"].strip()
                    for r in csv.DictReader(fh)}
    out: dict[str, Trajectory] = {}
    for path in sorted(folder.glob("*.conversation.json")):
        if verdicts.get(path.name) != "0":
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        steps = [Step(kind=StepKind.TOOL_CALL, name=str(c.get("tool")),
                      arguments=json.dumps(c.get("arguments") or {}),
                      observation=_tool_output(c.get("output")),
                      error="Query Failed" in _tool_output(c.get("output")))
                 for c in doc.get("tool_calls") or []]
        final = str(doc.get("final_text") or "")
        steps.append(Step(kind=StepKind.MESSAGE, role="assistant", content=final))
        out[path.name] = Trajectory(
            task=Task(id=str(doc.get("id")), question=str(doc.get("question")),
                      reference_sql=None, ground_truth=None),
            run=Run(name="gpt-oss-20b (unanswerable)", model="gpt-oss-20b"),
            steps=steps, final_answer=final, outcome=Outcome(success=False, reward=0.0))
    return out


def _measure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    out: dict[str, Any] = {"n": n}
    for who in ("finder", "heuristic"):
        cats = [r[f"{who}_category"] or "(none)" for r in rows]
        gold = [r["category"] for r in rows]
        exact = sum(r[f"{who}_step"] == r["step"] for r in rows)
        near = sum(r[f"{who}_step"] == r["step"] or (
            isinstance(r[f"{who}_step"], int) and isinstance(r["step"], int)
            and abs(r[f"{who}_step"] - r["step"]) <= 1) for r in rows)
        kappa = cohens_kappa_from_labels(gold, cats).kappa if n else math.nan
        out[who] = {"accuracy": round(sum(a == b for a, b in zip(cats, gold, strict=True)) / n, 3),
                    "kappa": None if math.isnan(kappa) else round(float(kappa), 3),
                    "step_exact": round(exact / n, 3), "step_within_1": round(near / n, 3),
                    "proposal": round(sum(bool(r[f"{who}_proposal"]) for r in rows) / n, 3)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--items", action="store_true", help="print every item")
    args = ap.parse_args()
    labeller = HeuristicLabeller(ehr_path=args.db)
    claude = failed_trajectories([SHARED / "m3-claude-sonnet-4" / "EHRSQL_benchmark.csv"])
    unans = unanswerable_trajectories(SHARED / "m3-unanswerable-sample")
    with LABELS.open(encoding="utf-8") as fh:
        gold = list(csv.DictReader(fh))
    by_set: dict[str, list[dict[str, Any]]] = {}
    for g in gold:
        traj = (claude if g["set"] == "claude" else unans)[g["key"]]
        result = labeller.label(traj, "ehr_complex")
        ev = result.evidence or {}
        row = {"key": g["key"], "category": g["category"],
               "step": None if g["first_error_step"] == "final" else int(g["first_error_step"]),
               "finder_category": ev.get("category"), "finder_step": ev.get("step"),
               "finder_proposal": bool(ev.get("category")),
               "heuristic_category": result.category,
               "heuristic_step": result.first_error_step,
               "heuristic_proposal": result.confidence > FALLBACK_CONFIDENCE,
               "reason": ev.get("reason")}
        by_set.setdefault(g["set"], []).append(row)
        if args.items:
            print(json.dumps(row))
    print(json.dumps({name: _measure(rows) for name, rows in by_set.items()}, indent=1))


if __name__ == "__main__":
    main()
