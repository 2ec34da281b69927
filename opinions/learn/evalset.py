"""The hand-labelled evaluation set: gold labels from a CSV, failures read from trajectory files."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from faillab_core.errors import FaillabError
from trajectories.model import Trajectory
from trajectories.outcome import trajectory_success


class EvalSetError(FaillabError, ValueError):
    """The gold-label file is unreadable or inconsistent with the trajectories."""


@dataclass(frozen=True, slots=True)
class GoldLabel:
    trajectory_id: str
    category: str
    first_error_step: int | None


def load_gold(path: Path) -> dict[str, GoldLabel]:
    """Adjudicated labels keyed by trajectory id (columns trajectory_id, category,
    first_error_step; others are ignored)."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as err:
        raise EvalSetError(f"{path}: cannot read ({err})") from None
    gold: dict[str, GoldLabel] = {}
    for number, row in enumerate(rows, start=2):
        tid = (row.get("trajectory_id") or "").strip()
        category = (row.get("category") or "").strip()
        if not tid or not category:
            raise EvalSetError(f"{path}: line {number} needs trajectory_id and category")
        if tid in gold:
            raise EvalSetError(f"{path}: line {number} repeats trajectory {tid}")
        step_text = (row.get("first_error_step") or "").strip()
        try:
            step = int(step_text) if step_text else None
        except ValueError:
            raise EvalSetError(
                f"{path}: line {number}: first_error_step {step_text!r} is not a number"
            ) from None
        gold[tid] = GoldLabel(tid, category, step)
    return gold


def is_failure(trajectory: Trajectory) -> bool:
    """A failure by the one outcome rule (``trajectories.outcome``) read from the record: its
    recorded verdict, else the judge's (a file carries no people's verdicts)."""
    return trajectory_success(trajectory) is False


def failed_trajectories(paths: Iterable[Path]) -> dict[str, Trajectory]:
    """Failed trajectories of the given files, keyed by the id ``faillab import`` assigns."""
    from trajectories.importers import read_file

    found: dict[str, Trajectory] = {}
    for path in paths:
        for _location, traj in read_file(path).trajectories:
            if traj.id and is_failure(traj):
                found[traj.id] = traj
    return found


DEV, HELD_OUT = "dev", "held_out"


def split_halves(task_ids: Iterable[str]) -> dict[str, str]:
    """Task id -> ``dev`` (rules may be designed looking at its items) or ``held_out`` (only
    measured). Fixed before any item was read, from the task ids alone: tasks are taken in the
    order of their id's SHA-256 and each goes to the half with fewer failures so far, so the
    halves hold about as many failures each (a plain hash parity gave 21 / 74 on the AI612 set,
    whose 10 tasks have 2 to 19 failures), and one task's failures never straddle the halves,
    so a rule tuned to a task cannot be rewarded on the other half."""
    import hashlib
    from collections import Counter

    counts = Counter(task_ids)
    sizes = {DEV: 0, HELD_OUT: 0}
    out: dict[str, str] = {}
    for task in sorted(counts, key=lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest()):
        half = DEV if sizes[DEV] <= sizes[HELD_OUT] else HELD_OUT
        out[task] = half
        sizes[half] += counts[task]
    return out
