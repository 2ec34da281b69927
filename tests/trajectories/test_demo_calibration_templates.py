"""The calibration-only demo templates stay out of the default demo's schedule."""

from __future__ import annotations

from pathlib import Path


def test_the_default_demo_schedule_has_no_calibration_templates(tmp_path: Path) -> None:
    from trajectories.demo import build_ehr
    from trajectories.demo.sqlexec import DemoDatabase
    from trajectories.demo.tasks import make_tasks

    path = tmp_path / "ehr.duckdb"
    build_ehr(path, seed=1, n_patients=300)
    with DemoDatabase(path) as db:
        plain = {t.task.template_id for t in make_tasks(db, seed=1, n_tasks=48)}
        extended = {t.task.template_id for t in make_tasks(db, seed=1, n_tasks=48,
                                                            calibration=True)}
    assert not any((t or "").startswith("grounding.") for t in plain)
    assert {"grounding.last_drug_by_route", "grounding.recent_drugs"} <= extended
