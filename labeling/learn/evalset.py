"""The hand-labelled evaluation set: gold labels from a CSV, failures read from trajectory files."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from trajectories.model import Trajectory


class EvalSetError(ValueError):
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
    """A recorded failure: the same rule the finder's CLI uses."""
    out = trajectory.outcome
    if out is None:
        return False
    return out.success is False or (out.reward is not None and out.reward < 1)


def failed_trajectories(paths: Iterable[Path]) -> dict[str, Trajectory]:
    """Failed trajectories of the given files, keyed by the id ``faillab import`` assigns."""
    from trajectories.importers import read_file

    found: dict[str, Trajectory] = {}
    for path in paths:
        for _location, traj in read_file(path).trajectories:
            if traj.id and is_failure(traj):
                found[traj.id] = traj
    return found
