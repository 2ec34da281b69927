"""Demo task templates on laboratory results."""

from __future__ import annotations

import random
from collections.abc import Callable

from trajectories.demo.drafting import (
    BLOOD_LABS,
    LOGIC,
    MISSING_LAB,
    ORD,
    SEMANTIC,
    Ctx,
    Draft,
    Variant,
    adm_cte,
    adm_cte_by_id,
    adm_list,
    code_lookup,
    code_variants,
    codes,
    fake_lab_probe,
    lab_lookup,
    lab_variant,
    record_noise,
)
from trajectories.demo.ehr import CONCEPTS, LAB_ITEMS


def t_first_lab_kth_admission(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.multi if rng.random() < 0.6 else ctx.sids)
    k = rng.randint(1, min(ctx.n_adm[sid], 3))
    lab = rng.choice(BLOOD_LABS)

    def build(s: int, item: int = lab.itemid, order: str = "l.charttime, l.labevent_id",
              cte: Callable[[int], str] = adm_cte) -> str:
        return (f"{cte(s)}\nSELECT l.valuenum\nFROM labevents l JOIN adm ON adm.hadm_id = "
                f"l.hadm_id\nWHERE adm.rn = {k} AND l.itemid = {item}\nORDER BY {order} LIMIT 1")

    def question(s: int) -> str:
        return (f"What was the first {lab.label.lower()} result for patient {s} during their "
                f"{ORD[k]} hospital admission?")

    d = Draft("labs.first_value_kth_admission", "Labs", "patient", question(sid), build(sid),
               "a single number, as [[value]]", ("labevents", "d_labitems", "admissions"),
               [lab_lookup(lab.label), adm_list(sid)],
               [Variant(LOGIC, build(sid, order="l.charttime DESC"),
                        "Ordering the results by time to pick the value."),
                Variant(SEMANTIC, "SELECT valuenum FROM labevents\nWHERE subject_id = "
                                  f"{sid} AND itemid = {lab.itemid}\nORDER BY charttime, "
                                  "labevent_id LIMIT 1",
                        "Taking the patient's first result."),
                *lab_variant(lab, lambda item: build(sid, item))],
               params={"subject_id": sid, "k": k, "itemid": lab.itemid})
    if noise:
        record_noise(ctx, d, sid, build, question)
    return d


def t_count_tests_next_admission(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.multi)
    lab = rng.choice(BLOOD_LABS)

    def build(item: int = lab.itemid, rn: int = 2, cte: Callable[[int], str] = adm_cte) -> str:
        return (f"{cte(sid)}\nSELECT COUNT(*) AS n_tests\nFROM labevents l JOIN adm ON "
                f"adm.hadm_id = l.hadm_id\nWHERE adm.rn = {rn} AND l.itemid = {item}")

    ref = build()
    if ctx.db.run(ref).rows[0][0] == 0:
        return None  # a zero count is a legitimate answer but a dull task; redraw
    return Draft("labs.count_tests_next_admission", "Labs", "patient",
                  f"During the hospitalization immediately following patient {sid}'s first "
                  f"admission, how many {lab.label.lower()} tests were performed?", ref,
                  "a single integer, as [[count]]", ("labevents", "d_labitems", "admissions"),
                  [lab_lookup(lab.label), adm_list(sid)],
                  [Variant(LOGIC, build(cte=adm_cte_by_id), "Numbering admissions by hadm_id."),
                   Variant(SEMANTIC, build(rn=1), "Counting tests in the first admission."),
                   *lab_variant(lab, lambda item: build(item))],
                  params={"subject_id": sid, "itemid": lab.itemid})


def t_first_exceed_time(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    lab = rng.choice([li for li in BLOOD_LABS if li.label in
                      ("Potassium", "Creatinine", "Glucose", "Sodium", "White Blood Cells")])
    sid = rng.choice(ctx.sids)
    row = ctx.db.run(f"SELECT MAX(valuenum), COUNT(*) FROM labevents WHERE subject_id = {sid} "
                     f"AND itemid = {lab.itemid}").rows[0]
    if row[0] is None or row[1] < 3:
        return None
    thr = round(float(row[0]) * 0.9, lab.decimals if lab.decimals else 0)
    if thr <= lab.high:
        return None

    def build(t: float, cmp: str = ">", order: str = "l.charttime") -> str:
        return ("SELECT l.charttime\nFROM labevents l\nWHERE l.subject_id = "
                f"{sid} AND l.itemid = {lab.itemid} AND l.valuenum {cmp} {t}\n"
                f"ORDER BY {order} LIMIT 1")

    def question(t: float) -> str:
        return (f"When did patient {sid}'s blood {lab.label.lower()} first exceed {t:g} "
                f"{lab.unit}?")

    fmt = "a single timestamp 'YYYY-MM-DD HH:MM:SS', as [[timestamp]]"
    d = Draft("labs.first_exceed_time", "Labs", "patient", question(thr), build(thr), fmt,
               ("labevents", "d_labitems"), [lab_lookup(lab.label)],
               [Variant(LOGIC, build(thr, order="l.valuenum DESC"),
                        "Sorting the qualifying results to find the one that exceeded it."),
                Variant(SEMANTIC, "SELECT l.charttime\nFROM labevents l\nWHERE l.subject_id = "
                                  f"{sid} AND l.itemid = {lab.itemid}\n"
                                  "ORDER BY l.charttime LIMIT 1",
                        "Taking the time of the first measurement."),
                *lab_variant(lab, lambda item: build(thr).replace(
                    f"itemid = {lab.itemid}", f"itemid = {item}"))],
               params={"subject_id": sid, "itemid": lab.itemid, "threshold": thr})
    if noise:
        bad = round(thr * 10, 1)
        d.noise = Draft(d.template_id, d.intent, d.scope, question(bad), build(bad), fmt,
                         d.tables, d.lookups, [], noise_type="value",
                         probe=f"SELECT MAX(valuenum) FROM labevents WHERE subject_id = {sid} "
                               f"AND itemid = {lab.itemid}",
                         probe_note=f"The highest {lab.label.lower()} on record is far below "
                                    f"{bad:g} {lab.unit} (a physiologically implausible value), "
                                    "so no result exceeded it.",
                         relaxed=Variant(SEMANTIC, build(thr),
                                         f"{bad:g} {lab.unit} looks like a decimal slip; using "
                                         f"{thr:g}."),
                         params={**d.params, "threshold": bad})
    return d


def t_top5_icd_with_lab(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    lab = rng.choice(LAB_ITEMS[:19])

    def build(lab_pred: str) -> str:
        return ("SELECT d.icd_code, COUNT(DISTINCT d.subject_id) AS n_patients\n"
                "FROM diagnoses_icd d\nWHERE d.hadm_id IN (\n  SELECT l.hadm_id FROM labevents l "
                f"WHERE {lab_pred}\n)\nGROUP BY d.icd_code ORDER BY n_patients DESC, d.icd_code "
                "LIMIT 5")

    def question(name: str) -> str:
        return (f"Among patients who had a {name} test during a hospital admission, which 5 ICD "
                "diagnosis codes were recorded for the largest number of distinct patients in "
                "the same admission?")

    fmt = "a list of [icd_code, n_patients] rows, most patients first, ties by code"
    d = Draft("labs.top5_icd_with_lab", "Labs", "population", question(lab.label),
               build(f"l.itemid = {lab.itemid}"), fmt,
               ("labevents", "d_labitems", "diagnoses_icd"), [lab_lookup(lab.label)],
               [Variant(LOGIC, "SELECT d.icd_code, COUNT(*) AS n_patients\nFROM labevents l "
                               "JOIN diagnoses_icd d ON d.hadm_id = l.hadm_id\n"
                               f"WHERE l.itemid = {lab.itemid}\nGROUP BY d.icd_code "
                               "ORDER BY n_patients DESC, d.icd_code LIMIT 5",
                        "Joining labs to diagnoses on hadm_id and counting per code."),
                Variant(SEMANTIC, "SELECT d.icd_code, COUNT(DISTINCT d.subject_id) AS n_patients\n"
                                  "FROM diagnoses_icd d\nWHERE d.subject_id IN (\n"
                                  "  SELECT l.subject_id FROM labevents l WHERE l.itemid = "
                                  f"{lab.itemid}\n)\nGROUP BY d.icd_code ORDER BY n_patients "
                                  "DESC, d.icd_code LIMIT 5",
                        "Selecting the patients who had the test and counting their codes."),
                *lab_variant(lab, lambda item: build(f"l.itemid = {item}"))],
               params={"itemid": lab.itemid})
    if noise and lab.label in MISSING_LAB:
        fake = MISSING_LAB[lab.label]
        d.noise = Draft(d.template_id, d.intent, d.scope, question(fake),
                         build(f"l.itemid IN (SELECT itemid FROM d_labitems WHERE label = "
                               f"'{fake}')"), fmt, d.tables, [lab_lookup(fake)], [],
                         noise_type="query",
                         probe=fake_lab_probe(fake),
                         probe_note=f"No '{fake}' test exists in d_labitems, so the cohort is "
                                    "empty.",
                         relaxed=Variant(SEMANTIC, build(f"l.itemid = {lab.itemid}"),
                                         f"'{fake}' is not listed; {lab.label} is the closest "
                                         "test, using it."),
                         params={"lab": fake})
    return d


def t_avg_lab_dx(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice(CONCEPTS)
    lab = rng.choice(BLOOD_LABS)

    def build(pred: str) -> str:
        return ("SELECT ROUND(AVG(l.valuenum), 2) AS mean_value\nFROM labevents l\n"
                f"WHERE l.itemid = {lab.itemid} AND l.hadm_id IN (\n"
                f"  SELECT d.hadm_id FROM diagnoses_icd d WHERE {pred}\n)")

    return Draft("labs.avg_value_dx", "Labs", "population",
                  f"What is the mean blood {lab.label.lower()} value over all measurements taken "
                  f"during admissions in which {c.name} was coded?",
                  build(codes(c)), "a single number rounded to 2 decimals, as [[value]]",
                  ("labevents", "d_labitems", "diagnoses_icd", "d_icd_diagnoses"),
                  [code_lookup(c), lab_lookup(lab.label)],
                  [Variant(LOGIC, "SELECT ROUND(AVG(l.valuenum), 2) AS mean_value\n"
                                  "FROM labevents l JOIN diagnoses_icd d ON d.subject_id = "
                                  f"l.subject_id\nWHERE l.itemid = {lab.itemid} AND {codes(c)}",
                           "Joining labs to diagnoses and averaging."),
                   *code_variants(c, build)],
                  params={"concept": c.key, "itemid": lab.itemid})
