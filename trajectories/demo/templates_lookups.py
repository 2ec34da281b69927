"""Demo task templates whose reference looks its codes up by name, as EHRSQL's references do.

The other templates write their item ids and ICD codes as literals. Real references ground a
name in a dictionary table inside the query (``itemid IN (SELECT itemid FROM d_labitems WHERE
label = 'hemoglobin')``), and the failure that goes with that is grounding the name wrongly:
the agent's search for a partial name lists several items and it takes the wrong one, it keeps
the partial name as a pattern, or it uses the other ICD version's code. These templates carry
those mistakes as Medical-Code Lookup variants, beside a misreading and a logic slip over the
right look-up, so the evidence finder's ``lookup`` part can be calibrated on failures whose
cause is known.
"""

from __future__ import annotations

import random

from trajectories.demo.drafting import (
    CODE,
    KEYWORD,
    LOGIC,
    SEMANTIC,
    Ctx,
    Draft,
    Variant,
    code_lookup,
    quote_list,
)
from trajectories.demo.ehr import CONCEPTS

__all__ = ["t_dx_by_title", "t_measurement_by_name"]

# (dictionary, events table, the name asked for, the partial name an agent searches for, the
# item that search also lists and the agent takes instead). Every partial name lists both items.
_CONFUSABLE_ITEMS: tuple[tuple[str, str, str, str, int], ...] = (
    ("d_labitems", "labevents", "Hemoglobin", "hem", 52104),
    ("d_labitems", "labevents", "Hematocrit", "hem", 52101),
    ("d_labitems", "labevents", "Potassium, Whole Blood", "potassium", 52014),
    ("d_items", "chartevents", "Non Invasive Blood Pressure systolic", "systolic", 226110),
    ("d_items", "chartevents", "Arterial Blood Pressure systolic", "systolic", 226104),
    ("d_items", "chartevents", "Non Invasive Blood Pressure diastolic", "non invasive", 226104),
)


def t_measurement_by_name(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    dictionary, events, label, word, wrong = rng.choice(_CONFUSABLE_ITEMS)
    right = ctx.db.run(f"SELECT itemid FROM {dictionary} WHERE label = '{label}'").rows
    if len(right) != 1:
        return None
    # A patient with both items on record, so taking the wrong one changes the answer.
    pool = [int(r[0]) for r in ctx.db.run(
        f"SELECT subject_id FROM {events} WHERE itemid IN ({right[0][0]}, {wrong}) "
        "AND valuenum IS NOT NULL GROUP BY 1 HAVING COUNT(DISTINCT itemid) = 2 ORDER BY 1"
    ).rows]
    if not pool:
        return None
    sid = rng.choice(pool)
    lookup = f"SELECT itemid FROM {dictionary} WHERE label = '{label}'"

    def build(item_pred: str, tail: str = "") -> str:
        return (f"SELECT MAX(e.valuenum) AS max_value\nFROM {events} e\n"
                f"WHERE e.subject_id = {sid} AND {item_pred}{tail}")

    wrong_label = ctx.db.run(f"SELECT label FROM {dictionary} WHERE itemid = {wrong}").rows[0][0]
    return Draft(
        f"lookups.max_{events}_by_name", "Labs" if events == "labevents" else "Vitals", "patient",
        f"What was the highest {label} value recorded for patient {sid}?",
        build(f"e.itemid IN (\n  {lookup}\n)"), "a single number, as [[value]]",
        (events, dictionary),
        [f"SELECT itemid, label FROM {dictionary} WHERE label ILIKE '%{word}%' ORDER BY itemid"],
        [Variant(CODE, build(f"e.itemid = {wrong}"),
                 f"Searching {dictionary} for '{word}' lists {wrong_label} under itemid {wrong}; "
                 "using that item."),
         Variant(CODE, build(f"e.itemid IN (\n  SELECT itemid FROM {dictionary} "
                             f"WHERE label ILIKE '%{word}%'\n)"),
                 f"Matching the items by name ('%{word}%') so no spelling is missed."),
         Variant(SEMANTIC, build(f"e.itemid IN (\n  {lookup}\n)").replace(
             "MAX(e.valuenum)", "MIN(e.valuenum)"),
                 f"Looking for the most abnormal, i.e. the lowest, {label} value."),
         Variant(LOGIC, build(f"e.itemid IN (\n  {lookup}\n)", "\nGROUP BY e.hadm_id"),
                 "Taking the highest value per admission.")],
        params={"subject_id": sid, "label": label},
    )


def t_dx_by_title(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice([c for c in CONCEPTS if c.icd9 and c.icd10])
    version = rng.choice((9, 10))
    own, other = (c.icd9, c.icd10) if version == 9 else (c.icd10, c.icd9)
    code, title = rng.choice(own)
    if "'" in title:
        return None
    lookup = f"SELECT icd_code FROM d_icd_diagnoses WHERE long_title = '{title}'"

    def build(code_pred: str, counted: str = "COUNT(DISTINCT d.subject_id)") -> str:
        return f"SELECT {counted} AS n_patients\nFROM diagnoses_icd d\nWHERE {code_pred}"

    right = build(f"d.icd_code IN (\n  {lookup}\n)")
    siblings = [sib for sib, _ in own if sib != code]
    other_codes = quote_list([o for o, _ in other])
    variants = [
        Variant(CODE, build(f"d.icd_code IN ({other_codes})"),
                f"{c.name.capitalize()} is coded {', '.join(o for o, _ in other)}; filtering "
                "on that."),
        Variant(CODE, build(f"d.icd_code IN (\n  SELECT icd_code FROM d_icd_diagnoses WHERE "
                            f"long_title ILIKE '%{KEYWORD[c.key]}%'\n)"),
                f"Taking every code whose title mentions '{KEYWORD[c.key]}'."),
        Variant(SEMANTIC, build(f"d.icd_code IN (\n  {lookup}\n)",
                                "COUNT(DISTINCT d.hadm_id)"),
                "Counting the admissions in which it was coded."),
        Variant(LOGIC, build(f"d.icd_code IN (\n  {lookup}\n)", "COUNT(*)"),
                "Counting the diagnosis rows."),
    ]
    if siblings:
        variants.append(Variant(CODE, build(f"d.icd_code = '{siblings[0]}'"),
                                f"The look-up lists {siblings[0]} for {c.name}; using it."))
    return Draft(
        "lookups.patients_by_dx_title", "Diagnoses", "population",
        f"How many patients were diagnosed with {title.lower()}?", right,
        "a single integer, as [[count]]", ("diagnoses_icd", "d_icd_diagnoses"),
        [code_lookup(c)], variants, params={"concept": c.key, "icd_code": code},
    )
