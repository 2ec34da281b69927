"""Synthetic demo data: a MIMIC-IV-shaped EHR, verified tasks, and simulated agent runs.

Nothing here touches real patient data.  The demo exists so that every part of the workbench
(import, labelling, statistics, the UI, benchmarks) can run end to end on realistic-looking
trajectories whose failure category is known (``Trajectory.simulated_failure``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from trajectories.demo.agents import PROFILES, TEMPERATURES, AgentProfile, simulate_runs
from trajectories.demo.ehr import build_ehr, table_content_hash
from trajectories.demo.sqlexec import DemoDatabase
from trajectories.demo.tasks import FAILURE_CATEGORIES, TaskSpec, make_tasks
from trajectories.model import Task, Trajectory

__all__ = [
    "FAILURE_CATEGORIES",
    "PROFILES",
    "TEMPERATURES",
    "AgentProfile",
    "DemoDatabase",
    "DemoResult",
    "TaskSpec",
    "build_ehr",
    "generate_demo",
    "iter_demo_trajectories",
    "make_tasks",
    "table_content_hash",
]

EHR_FILENAME = "ehr.duckdb"


@dataclass
class DemoResult:
    ehr_path: Path
    trajectories: list[Trajectory]
    tasks: list[Task] = field(default_factory=list)


def iter_demo_trajectories(out_dir: Path, *, seed: int = 0, n_tasks: int = 72,
                           rollouts: int = 3, n_patients: int = 2000,
                           rebuild: bool = True,
                           profiles: tuple[AgentProfile, ...] = PROFILES,
                           temperatures: tuple[float, ...] = TEMPERATURES,
                           ) -> Iterator[Trajectory]:
    """Yield demo trajectories one at a time (for runs too large to hold in memory).

    Builds ``out_dir/ehr.duckdb`` first unless ``rebuild`` is false and it already exists.
    Yields len(profiles) * len(temperatures) * n_tasks * rollouts trajectories."""
    ehr_path = Path(out_dir) / EHR_FILENAME
    if rebuild or not ehr_path.exists():
        build_ehr(ehr_path, seed=seed, n_patients=n_patients)
    with DemoDatabase(ehr_path) as db:
        specs = make_tasks(db, seed=seed, n_tasks=n_tasks)
        yield from simulate_runs(db, specs, seed=seed, rollouts=rollouts, profiles=profiles,
                                 temperatures=temperatures)


def generate_demo(out_dir: Path, *, seed: int = 0, n_tasks: int = 72, rollouts: int = 3,
                  n_patients: int = 2000, calibration: bool = False) -> DemoResult:
    """Build the demo EHR under ``out_dir`` and simulate every configured agent on it.
    ``calibration`` adds the calibration-only task templates (another set of tasks and ids)."""
    ehr_path = Path(out_dir) / EHR_FILENAME
    build_ehr(ehr_path, seed=seed, n_patients=n_patients)
    with DemoDatabase(ehr_path) as db:
        specs = make_tasks(db, seed=seed, n_tasks=n_tasks, calibration=calibration)
        trajectories = list(simulate_runs(db, specs, seed=seed, rollouts=rollouts))
    return DemoResult(ehr_path, trajectories, [s.task for s in specs])
