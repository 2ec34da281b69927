"""Demo tasks: questions, reference SQL, verified answers, and the plausible wrong SQL that
simulated agents write, drawn round-robin from the templates (``templates_*`` modules, built
from :mod:`trajectories.demo.drafting`).

Each template draws its parameters from the generated database (so the clean answer is never
empty), executes its reference SQL, and stores the result as the ground truth.  Templates also
carry *variants*: coherent SQL that embodies one failure category (querying icustays instead
of transfers, ICD-10-only code lists, COUNT(*) over joined rows, ...).  Keeping the wrong SQL
next to the right SQL is what lets the agent simulator produce failures whose signals look like
the real thing, and lets tests check that a variant really changes the answer.
"""

from __future__ import annotations

import random
from typing import Any

from trajectories.demo.drafting import (
    FAILURE_CATEGORIES,
    Ctx,
    Draft,
    TaskSpec,
    Template,
    Variant,
)
from trajectories.demo.sqlexec import DemoDatabase
from trajectories.demo.templates_diagnoses import (
    t_count_admissions_dx,
    t_days_to_readmission,
    t_patients_dx_since_year,
    t_primary_codes,
)
from trajectories.demo.templates_grounding import CALIBRATION_TEMPLATES
from trajectories.demo.templates_labs import (
    t_avg_lab_dx,
    t_count_tests_next_admission,
    t_first_exceed_time,
    t_first_lab_kth_admission,
    t_top5_icd_with_lab,
)
from trajectories.demo.templates_lookups import t_dx_by_title, t_measurement_by_name
from trajectories.demo.templates_orders import (
    t_drugs_kth_admission,
    t_insurance_by_severity,
    t_insurance_drg_latest,
    t_medicare_share_dx,
    t_top5_drugs_dx_lab,
)
from trajectories.demo.templates_stays import (
    t_age_at_admission,
    t_avg_sbp_by_unit,
    t_careunit_path,
    t_last_careunit_top5,
    t_marital_by_location,
    t_max_hr_first12h,
)
from trajectories.model import Task

__all__ = [
    "FAILURE_CATEGORIES",
    "TEMPLATES",
    "TaskSpec",
    "Variant",
    "make_tasks",
]

TEMPLATES: tuple[tuple[Template, bool], ...] = (
    # (template, can produce a Clean/Noise pair)
    (t_age_at_admission, True),
    (t_careunit_path, True),
    (t_last_careunit_top5, False),
    (t_marital_by_location, False),
    (t_max_hr_first12h, False),
    (t_avg_sbp_by_unit, False),
    (t_drugs_kth_admission, True),
    (t_top5_drugs_dx_lab, True),
    (t_insurance_drg_latest, True),
    (t_insurance_by_severity, True),
    (t_medicare_share_dx, False),
    (t_first_lab_kth_admission, True),
    (t_count_tests_next_admission, False),
    (t_first_exceed_time, True),
    (t_top5_icd_with_lab, True),
    (t_avg_lab_dx, False),
    (t_primary_codes, True),
    (t_count_admissions_dx, False),
    (t_patients_dx_since_year, False),
    (t_days_to_readmission, False),
    (t_measurement_by_name, False),
    (t_dx_by_title, False),
)


def _spec(d: Draft, task_id: str, gt: Any, pair_id: str | None, variant: str | None) -> TaskSpec:
    # params is an extra field (the native format keeps unknown fields)
    task = Task.model_validate({
        "id": task_id, "question": d.question, "intent": d.intent, "scope": d.scope,
        "template_id": d.template_id, "reference_sql": d.sql, "ground_truth": gt,
        "answer_format": d.answer_format, "split": "test", "pair_id": pair_id,
        "noise_type": d.noise_type, "variant": variant, "params": d.params,
    })
    return TaskSpec(task, d.tables, d.lookups, d.variants, d.probe, d.probe_note, d.relaxed)


def make_tasks(db: DemoDatabase, *, seed: int, n_tasks: int = 72,
               calibration: bool = False) -> list[TaskSpec]:
    """Draw ``n_tasks`` tasks (Clean/Noise pairs count as two) and verify every answer by
    executing its reference SQL.  Templates are visited round-robin so any ``n_tasks`` >= 40
    covers all six intents at both scopes. ``calibration`` adds the calibration-only templates
    (:mod:`trajectories.demo.templates_grounding`) to the schedule; without it the tasks, and so
    every demo id, are what they always were."""
    templates = TEMPLATES + CALIBRATION_TEMPLATES if calibration else TEMPLATES
    rng = random.Random(f"tasks|{seed}")
    ctx = Ctx(db)
    specs: list[TaskSpec] = []
    visits = [0] * len(templates)
    seen: set[str] = set()
    i = 0
    while len(specs) < n_tasks:
        t_index = i % len(templates)
        i += 1
        template, pairable = templates[t_index]
        want_pair = pairable and visits[t_index] % 2 == 0 and n_tasks - len(specs) >= 2
        visits[t_index] += 1
        chosen: tuple[Draft, Any] | None = None
        for attempt in range(25):
            draft = template(ctx, rng, want_pair)
            if draft is None:
                continue
            gt = db.run(draft.sql).answer
            if gt is None:
                continue  # clean tasks must have evidence in the database
            chosen = (draft, gt)
            # small parameter spaces repeat at scale: prefer an unseen question, but accept a
            # repeat (it still gets its own task id) rather than starving the template
            if draft.sql not in seen or attempt >= 10:
                break
        if chosen is not None:
            draft, gt = chosen
            seen.add(draft.sql)
            noise = draft.noise
            noise_ok = noise is not None and db.run(noise.sql).error is None \
                and db.run(noise.sql).answer is None
            n = len(specs)
            if noise_ok and noise is not None:
                pair = f"pair-{n:05d}"
                specs.append(_spec(draft, f"demo-{n:05d}", gt, pair, "clean"))
                specs.append(_spec(noise, f"demo-{n + 1:05d}", None, pair, "noise"))
            else:
                specs.append(_spec(draft, f"demo-{n:05d}", gt, None, None))
        if i > 50 * (n_tasks + len(templates)):
            raise RuntimeError("could not draw enough answerable tasks; is the database empty?")
    return specs
