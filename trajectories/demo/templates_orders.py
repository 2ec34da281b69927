"""Demo task templates on medications, insurance and DRG costs."""

from __future__ import annotations

import random
from collections.abc import Callable

from trajectories.demo.drafting import (
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


def t_drugs_kth_admission(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.multi if rng.random() < 0.7 else ctx.sids)
    k = rng.randint(1, min(ctx.n_adm[sid], 3))

    def build(s: int, cte: Callable[[int], str] = adm_cte) -> str:
        return (f"{cte(s)}\nSELECT p.drug, COUNT(*) AS n_prescriptions\nFROM prescriptions p "
                f"JOIN adm ON adm.hadm_id = p.hadm_id\nWHERE adm.rn = {k}\n"
                "GROUP BY p.drug ORDER BY n_prescriptions DESC, p.drug")

    def question(s: int) -> str:
        return (f"Which drugs were prescribed to patient {s} during their {ORD[k]} hospital "
                "admission, and how many times was each prescribed?")

    variants = [
        Variant(LOGIC, build(sid, adm_cte_by_id), "Numbering admissions by hadm_id."),
        Variant(SEMANTIC, "SELECT drug, COUNT(*) AS n_prescriptions FROM prescriptions\n"
                          f"WHERE subject_id = {sid}\nGROUP BY drug "
                          "ORDER BY n_prescriptions DESC, drug",
                "Counting the patient's prescriptions per drug."),
    ]
    d = Draft("medications.drugs_kth_admission", "Medications", "patient", question(sid),
               build(sid), "a list of [drug, n_prescriptions] rows, most frequent first, ties "
               "by drug name", ("prescriptions", "admissions"), [adm_list(sid)], variants,
               params={"subject_id": sid, "k": k})
    if noise:
        record_noise(ctx, d, sid, build, question)
    return d


def t_top5_drugs_dx_lab(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice(CONCEPTS)
    lab = rng.choice(LAB_ITEMS[:19])

    def build(pred: str, lab_pred: str = f"l.itemid = {lab.itemid}") -> str:
        return ("WITH adm AS (\n  SELECT d.hadm_id FROM diagnoses_icd d\n"
                f"  WHERE {pred}\n  INTERSECT\n"
                f"  SELECT l.hadm_id FROM labevents l WHERE {lab_pred}\n)\n"
                "SELECT p.drug, COUNT(DISTINCT p.hadm_id) AS n_admissions\n"
                "FROM prescriptions p JOIN adm ON adm.hadm_id = p.hadm_id\n"
                "GROUP BY p.drug ORDER BY n_admissions DESC, p.drug LIMIT 5")

    def question(lab_name: str) -> str:
        return (f"Looking across all admissions with {c.name} documented and a {lab_name} lab "
                "obtained, which five medications were prescribed in the most separate "
                "admissions?")

    variants = [
        Variant(LOGIC, "SELECT p.drug, COUNT(*) AS n_admissions\nFROM prescriptions p\n"
                       "JOIN diagnoses_icd d ON d.hadm_id = p.hadm_id\n"
                       "JOIN labevents l ON l.hadm_id = p.hadm_id\n"
                       f"WHERE {codes(c)} AND l.itemid = {lab.itemid}\n"
                       "GROUP BY p.drug ORDER BY n_admissions DESC, p.drug LIMIT 5",
                "Joining prescriptions, diagnoses and labs on hadm_id and counting."),
        *code_variants(c, build),
        *lab_variant(lab, lambda item: build(codes(c), f"l.itemid = {item}")),
    ]
    d = Draft("medications.top5_drugs_dx_lab", "Medications", "population", question(lab.label),
               build(codes(c)), "a list of [drug, n_admissions] rows, most admissions first, "
               "ties by drug name",
               ("prescriptions", "diagnoses_icd", "labevents", "d_labitems", "d_icd_diagnoses"),
               [code_lookup(c), lab_lookup(lab.label)], variants,
               params={"concept": c.key, "itemid": lab.itemid})
    if noise and lab.label in MISSING_LAB:
        fake = MISSING_LAB[lab.label]
        fake_sql = build(codes(c), f"l.itemid IN (SELECT itemid FROM d_labitems WHERE label = "
                                    f"'{fake}')")
        d.noise = Draft(d.template_id, d.intent, d.scope, question(fake), fake_sql,
                         d.answer_format, d.tables, [code_lookup(c), lab_lookup(fake)], [],
                         noise_type="query",
                         probe=fake_lab_probe(fake),
                         probe_note=f"There is no '{fake}' test in d_labitems, so no admission "
                                    "can satisfy the condition.",
                         relaxed=Variant(SEMANTIC, build(codes(c)),
                                         f"No exact '{fake}' item; {lab.label} (itemid "
                                         f"{lab.itemid}) is the closest match, using it."),
                         params={"concept": c.key, "lab": fake})
    return d


def t_insurance_drg_latest(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.multi)

    def build(s: int, order: str = "a.admittime DESC") -> str:
        return ("SELECT a.insurance, g.description\nFROM admissions a JOIN drgcodes g ON "
                "g.hadm_id = a.hadm_id AND g.drg_type = 'APR'\n"
                f"WHERE a.subject_id = {s}\nORDER BY {order} LIMIT 1")

    def question(s: int) -> str:
        return (f"For patient {s}'s most recent hospital admission, what insurance was recorded "
                "and what was the APR-DRG description?")

    d = Draft("cost.insurance_drg_latest", "Cost", "patient", question(sid), build(sid),
               "one row [insurance, drg_description]", ("admissions", "drgcodes"),
               [adm_list(sid), "SELECT DISTINCT drg_type FROM drgcodes ORDER BY 1"],
               [Variant(SEMANTIC, build(sid, "a.admittime ASC"),
                        "Looking at the patient's index admission."),
                Variant(LOGIC, build(sid, "a.hadm_id DESC"),
                        "The latest admission has the largest hadm_id.")],
               params={"subject_id": sid})
    if noise:
        record_noise(ctx, d, sid, build, question)
    return d


def t_insurance_by_severity(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sev = rng.randint(1, 4)

    def build(cond: str, agg: str = "COUNT(DISTINCT a.subject_id)") -> str:
        return (f"SELECT a.insurance, {agg} AS n_patients\nFROM admissions a JOIN drgcodes g ON "
                f"g.hadm_id = a.hadm_id\nWHERE g.drg_type = 'APR' AND g.drg_severity {cond}\n"
                "GROUP BY a.insurance ORDER BY n_patients DESC, a.insurance")

    def question(s: int) -> str:
        return (f"For admissions with an APR-DRG severity of {s}, how many distinct patients "
                "were covered by each insurance type?")

    fmt = "a list of [insurance, n_patients] rows, largest first, ties by name"
    d = Draft("cost.insurance_by_severity", "Cost", "population", question(sev),
               build(f"= {sev}"), fmt, ("admissions", "drgcodes"),
               ["SELECT drg_type, drg_severity, COUNT(*) FROM drgcodes "
                "GROUP BY 1, 2 ORDER BY 1, 2"],
               [Variant(LOGIC, build(f"= {sev}", "COUNT(*)"), "Counting admissions per insurance."),
                Variant(SEMANTIC, build(f">= {sev}"),
                        f"Including admissions of severity {sev} or higher.")],
               params={"severity": sev})
    if noise:
        bad = rng.choice((6, 7, 9))
        d.noise = Draft(d.template_id, d.intent, d.scope, question(bad), build(f"= {bad}"), fmt,
                         d.tables, d.lookups, [], noise_type="value",
                         probe="SELECT MIN(drg_severity), MAX(drg_severity) FROM drgcodes "
                               "WHERE drg_type = 'APR'",
                         probe_note=f"APR-DRG severity only ranges from 1 to 4; severity {bad} "
                                    "does not occur, so there is no such cohort.",
                         relaxed=Variant(SEMANTIC, build("= 4"),
                                         f"Severity {bad} is above the scale; using the highest "
                                         "severity, 4."),
                         params={"severity": bad})
    return d


def t_medicare_share_dx(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice(CONCEPTS)

    def build(pred: str) -> str:
        return ("WITH dx AS (\n  SELECT DISTINCT hadm_id FROM diagnoses_icd d\n"
                f"  WHERE {pred}\n)\nSELECT ROUND(100.0 * AVG(CASE WHEN a.insurance = 'Medicare' "
                "THEN 1 ELSE 0 END), 2) AS pct_medicare\nFROM admissions a JOIN dx ON "
                "dx.hadm_id = a.hadm_id")

    return Draft("cost.medicare_share_dx", "Cost", "population",
                  f"Among admissions in which {c.name} was coded, what percentage were covered by "
                  "Medicare?", build(codes(c)), "a single percentage rounded to 2 decimals, as "
                  "[[value]]", ("admissions", "diagnoses_icd", "d_icd_diagnoses"),
                  [code_lookup(c), "SELECT DISTINCT insurance FROM admissions ORDER BY 1"],
                  [Variant(SEMANTIC, "WITH pts AS (\n  SELECT DISTINCT subject_id FROM "
                                     f"diagnoses_icd d\n  WHERE {codes(c)}\n)\n"
                                     "SELECT ROUND(100.0 * AVG(CASE WHEN a.insurance = 'Medicare' "
                                     "THEN 1 ELSE 0 END), 2) AS pct_medicare\nFROM admissions a "
                                     "JOIN pts ON pts.subject_id = a.subject_id",
                           f"Taking all admissions of the patients with {c.name}."),
                   Variant(LOGIC, "SELECT ROUND(100.0 * AVG(CASE WHEN a.insurance = 'Medicare' "
                                  "THEN 1 ELSE 0 END), 2) AS pct_medicare\nFROM admissions a JOIN "
                                  "diagnoses_icd d ON d.subject_id = a.subject_id\n"
                                  f"WHERE {codes(c)}",
                           "Joining admissions to their diagnosis rows."),
                   *code_variants(c, build)],
                  params={"concept": c.key})
