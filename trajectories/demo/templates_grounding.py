"""Calibration-only demo templates: a term written in words where the database stores a code,
and a ranking cut to the wrong length.

They make the failures the evidence finder's ``codes`` value rule (a filter value no row holds)
and its ``order_limit`` part decide, beside the other categories over the same reference, so
both can be calibrated on failures whose cause is known. They are not in the default demo's
schedule (``tasks.TEMPLATES``): adding a template to the round-robin would change every later
task of every seed's demo, and with it the demo ids people and tests refer to. The calibration
benchmark asks for them (``generate_demo(..., calibration=True)``).
"""

from __future__ import annotations

import random

from trajectories.demo.drafting import CODE, LOGIC, SEMANTIC, Ctx, Draft, Variant

__all__ = ["CALIBRATION_TEMPLATES", "t_last_drug_by_route", "t_recent_drugs"]

# (route as stored, how the question says it, the words an agent writes for it instead)
_ROUTES: tuple[tuple[str, str, str], ...] = (
    ("PO", "by mouth", "oral"),
    ("IV", "intravenously", "intravenous"),
    ("SC", "subcutaneously", "subcutaneous"),
)


def t_last_drug_by_route(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    route, said, words = rng.choice(_ROUTES)
    pool = [int(r[0]) for r in ctx.db.run(
        f"SELECT subject_id FROM prescriptions WHERE route = '{route}' GROUP BY 1 "
        "HAVING COUNT(*) >= 2 ORDER BY 1").rows]
    if not pool:
        return None
    sid = rng.choice(pool)

    def build(pred: str, what: str = "MAX(p.starttime)") -> str:
        return (f"SELECT {what} AS last_given\nFROM prescriptions p\n"
                f"WHERE p.subject_id = {sid} AND {pred}")

    return Draft(
        "grounding.last_drug_by_route", "Medications", "patient",
        f"When was patient {sid} last prescribed a medication given {said}?",
        build(f"p.route = '{route}'"), "a single timestamp, as [[time]]",
        ("prescriptions",), [f"SELECT DISTINCT route FROM prescriptions WHERE subject_id = {sid}"],
        [Variant(CODE, build(f"p.route = '{words}'"),
                 f"Given {said} means route '{words}'; filtering on that."),
         Variant(SEMANTIC, build(f"p.route = '{route}'", "MAX(p.stoptime)"),
                 "The last time it was given is when the prescription ended."),
         Variant(LOGIC, build(f"p.route = '{route}'", "MIN(p.starttime)"),
                 "Taking the prescription times in order.")],
        params={"subject_id": sid, "route": route},
    )


def t_recent_drugs(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    n = rng.choice((3, 5))
    pool = [int(r[0]) for r in ctx.db.run(
        "SELECT subject_id FROM prescriptions GROUP BY 1 "
        f"HAVING COUNT(DISTINCT starttime) > {n + 2} ORDER BY 1").rows]
    if not pool:
        return None
    sid = rng.choice(pool)
    head = f"SELECT p.drug, p.starttime\nFROM prescriptions p\nWHERE p.subject_id = {sid}\n"
    order = "ORDER BY p.starttime DESC, p.drug"
    return Draft(
        "grounding.recent_drugs", "Medications", "patient",
        f"Which {n} prescriptions of patient {sid} were started most recently?",
        f"{head}{order}\nLIMIT {n}", "a list of [drug, starttime] rows, newest first",
        ("prescriptions",), [f"SELECT COUNT(*) FROM prescriptions WHERE subject_id = {sid}"],
        [Variant(LOGIC, f"{head}{order}", "Listing the patient's prescriptions, newest first."),
         Variant(LOGIC, f"{head}{order}\nLIMIT 1", "Taking the most recent prescription."),
         Variant(SEMANTIC, f"{head}ORDER BY p.stoptime DESC, p.drug\nLIMIT {n}",
                 "Most recent means the ones that ended last.")],
        params={"subject_id": sid, "n": n},
    )


CALIBRATION_TEMPLATES = ((t_last_drug_by_route, False), (t_recent_drugs, False))
