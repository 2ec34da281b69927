"""Demo task templates on diagnoses and readmissions."""

from __future__ import annotations

import random

from trajectories.demo.drafting import (
    LOGIC,
    SEMANTIC,
    Ctx,
    Draft,
    Variant,
    adm_list,
    code_lookup,
    code_variants,
    codes,
    record_noise,
)
from trajectories.demo.ehr import CONCEPTS


def t_primary_codes(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.multi)

    def build(s: int, order: str = "a.admittime") -> str:
        return ("SELECT d.icd_code, d.icd_version\nFROM diagnoses_icd d JOIN admissions a ON "
                f"a.hadm_id = d.hadm_id\nWHERE a.subject_id = {s} AND d.seq_num = 1\n"
                f"ORDER BY {order}")

    def question(s: int) -> str:
        return (f"List the primary diagnosis code (sequence number 1) of each of patient {s}'s "
                "admissions in chronological order, with its ICD version.")

    d = Draft("diagnoses.primary_codes", "Diagnoses", "patient", question(sid), build(sid),
               "a list of [icd_code, icd_version] rows in admission order",
               ("diagnoses_icd", "admissions"), [adm_list(sid)],
               [Variant(LOGIC, build(sid, "d.hadm_id"), "Ordering by admission id."),
                Variant(SEMANTIC, "SELECT d.icd_code, d.icd_version\nFROM diagnoses_icd d "
                                  f"JOIN admissions a ON a.hadm_id = d.hadm_id\nWHERE "
                                  f"a.subject_id = {sid} AND d.seq_num = (\n  SELECT "
                                  "MIN(seq_num) FROM diagnoses_icd)\nORDER BY a.admittime "
                                  "DESC", "Primary means the top-ranked code; newest first.")],
               params={"subject_id": sid})
    if noise:
        record_noise(ctx, d, sid, build, question)
    return d


def t_count_admissions_dx(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice(CONCEPTS)
    pool = [int(r[0]) for r in ctx.db.run(
        f"SELECT DISTINCT subject_id FROM diagnoses_icd d WHERE {codes(c)} ORDER BY 1").rows]
    if not pool:
        return None
    sid = rng.choice(pool)

    def build(pred: str) -> str:
        return ("SELECT COUNT(DISTINCT d.hadm_id) AS n_admissions\nFROM diagnoses_icd d\n"
                f"WHERE d.subject_id = {sid} AND ({pred})")

    return Draft("diagnoses.count_admissions_dx", "Diagnoses", "patient",
                  f"In how many of patient {sid}'s hospital admissions was {c.name} coded?",
                  build(codes(c)), "a single integer, as [[count]]",
                  ("diagnoses_icd", "d_icd_diagnoses"), [code_lookup(c)],
                  [Variant(LOGIC, "SELECT COUNT(*) AS n_admissions\nFROM diagnoses_icd d\n"
                                  f"WHERE d.subject_id = {sid}",
                           "Counting the patient's diagnosis rows."),
                   *code_variants(c, build)],
                  params={"subject_id": sid, "concept": c.key})


def t_patients_dx_since_year(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice(CONCEPTS)
    year = rng.randint(ctx.year_lo + 20, ctx.year_hi - 10)

    def build(pred: str, agg: str = "COUNT(DISTINCT d.subject_id)",
              time: str = f"a.admittime >= TIMESTAMP '{year}-01-01 00:00:00'") -> str:
        return (f"SELECT {agg} AS n_patients\nFROM diagnoses_icd d JOIN admissions a ON "
                f"a.hadm_id = d.hadm_id\nWHERE ({pred})\n  AND {time}")

    return Draft("diagnoses.patients_dx_since_year", "Diagnoses", "population",
                  f"How many distinct patients had {c.name} coded during an admission that "
                  f"began in {year} or later?", build(codes(c)),
                  "a single integer, as [[count]]",
                  ("diagnoses_icd", "d_icd_diagnoses", "admissions"), [code_lookup(c)],
                  [Variant(LOGIC, build(codes(c), agg="COUNT(*)"),
                           "Counting the matching diagnosis rows."),
                   Variant(LOGIC, build(codes(c), time=f"a.dischtime > TIMESTAMP "
                                                        f"'{year}-12-31 00:00:00'"),
                           f"Keeping admissions after {year}."),
                   *code_variants(c, build)],
                  params={"concept": c.key, "year": year})


def t_days_to_readmission(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice(CONCEPTS)

    def build(pred: str, next_only: bool = True) -> str:
        nxt = ("  SELECT f.subject_id, MIN(a.admittime) AS t1\n"
               "  FROM first_dx f JOIN admissions a ON a.subject_id = f.subject_id "
               "AND a.admittime > f.t0\n  GROUP BY f.subject_id") if next_only else (
               "  SELECT f.subject_id, a.admittime AS t1\n"
               "  FROM first_dx f JOIN admissions a ON a.subject_id = f.subject_id "
               "AND a.admittime > f.t0")
        return ("WITH first_dx AS (\n  SELECT d.subject_id, MIN(a.admittime) AS t0\n"
                "  FROM diagnoses_icd d JOIN admissions a ON a.hadm_id = d.hadm_id\n"
                f"  WHERE {pred}\n  GROUP BY d.subject_id\n), nxt AS (\n{nxt}\n)\n"
                "SELECT ROUND(AVG(date_diff('second', f.t0, n.t1)) / 86400.0, 2) AS mean_days\n"
                "FROM first_dx f JOIN nxt n ON n.subject_id = f.subject_id")

    return Draft("diagnoses.days_to_readmission", "Diagnoses", "population",
                  f"Across the cohort, what is the mean number of days from a patient's first "
                  f"admission coded with {c.name} to their next admission (patients without a "
                  "later admission are excluded)?", build(codes(c)),
                  "a single number of days rounded to 2 decimals, as [[value]]",
                  ("diagnoses_icd", "d_icd_diagnoses", "admissions"), [code_lookup(c)],
                  [Variant(LOGIC, build(codes(c), next_only=False),
                           "Measuring the gap to the later admissions."),
                   *code_variants(c, build)],
                  params={"concept": c.key})
