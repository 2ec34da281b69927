"""Demo task templates on demographics, care units and vital signs."""

from __future__ import annotations

import random
from collections.abc import Callable

from trajectories.demo.drafting import (
    CODE,
    LOGIC,
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
    record_noise,
)
from trajectories.demo.ehr import CONCEPTS


def t_age_at_admission(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.sids)
    k = rng.randint(1, min(ctx.n_adm[sid], 4))

    def build(s: int, cte: Callable[[int], str] = adm_cte) -> str:
        return (f"{cte(s)}\nSELECT p.anchor_age + (EXTRACT(YEAR FROM adm.admittime) - "
                f"p.anchor_year) AS age_at_admission\nFROM adm JOIN patients p ON p.subject_id = "
                f"{s}\nWHERE adm.rn = {k}")

    def question(s: int) -> str:
        return f"How old was patient {s} at the time of their {ORD[k]} hospital admission?"

    d = Draft("demographics.age_at_admission", "Demographics", "patient", question(sid),
               build(sid), "a single integer (age in years), as [[age]]",
               ("patients", "admissions"),
               [f"SELECT * FROM patients WHERE subject_id = {sid}", adm_list(sid)],
               [Variant(SEMANTIC, f"SELECT anchor_age FROM patients WHERE subject_id = {sid}",
                        "anchor_age is the patient's age, so I can read it directly."),
                Variant(LOGIC, build(sid, adm_cte_by_id),
                        "Numbering the admissions by hadm_id to find the requested one.")],
               params={"subject_id": sid, "k": k})
    if noise:
        record_noise(ctx, d, sid, build, question)
    return d


def t_careunit_path(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.icu_sids if rng.random() < 0.6 else ctx.sids)

    def last_adm(s: int, order: str = "DESC") -> str:
        return (f"(SELECT hadm_id FROM admissions WHERE subject_id = {s} "
                f"ORDER BY admittime {order} LIMIT 1)")

    def build(s: int) -> str:
        return (f"SELECT careunit FROM transfers\nWHERE hadm_id = {last_adm(s)}\n"
                "  AND careunit IS NOT NULL\nORDER BY intime, transfer_id")

    def question(s: int) -> str:
        return (f"In chronological order, which care units did patient {s} stay in during "
                "their most recent hospital admission?")

    variants = [
        Variant(SEMANTIC, f"SELECT first_careunit, last_careunit FROM icustays\nWHERE hadm_id = "
                          f"{last_adm(sid)}\nORDER BY intime",
                "Care units are ICU units, which are recorded in icustays."),
        Variant(LOGIC, f"SELECT careunit FROM transfers\nWHERE hadm_id = {last_adm(sid)}\n"
                       "ORDER BY intime, transfer_id",
                "Listing the transfer events of that admission in time order."),
    ]
    if ctx.n_adm[sid] > 1:
        variants.append(Variant(
            SEMANTIC, f"SELECT careunit FROM transfers\nWHERE hadm_id = {last_adm(sid, 'ASC')}\n"
                      "  AND careunit IS NOT NULL\nORDER BY intime, transfer_id",
            "Taking the patient's index admission as the one in question."))
    d = Draft("demographics.careunit_path", "Demographics", "patient", question(sid),
               build(sid), "a list of [careunit] rows in chronological order",
               ("transfers", "admissions", "icustays"),
               [adm_list(sid), "SELECT DISTINCT eventtype FROM transfers ORDER BY 1"],
               variants, params={"subject_id": sid})
    if noise:
        record_noise(ctx, d, sid, build, question)
    return d


def t_last_careunit_top5(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    c = rng.choice(CONCEPTS)

    def build(pred: str) -> str:
        return ("WITH dx AS (\n  SELECT DISTINCT hadm_id FROM diagnoses_icd d\n"
                f"  WHERE {pred}\n), last_unit AS (\n"
                "  SELECT t.hadm_id, t.careunit, ROW_NUMBER() OVER (\n"
                "    PARTITION BY t.hadm_id ORDER BY t.intime DESC, t.transfer_id DESC) AS rn\n"
                "  FROM transfers t JOIN dx ON dx.hadm_id = t.hadm_id\n"
                "  WHERE t.careunit IS NOT NULL\n)\n"
                "SELECT careunit, COUNT(*) AS n_admissions FROM last_unit WHERE rn = 1\n"
                "GROUP BY careunit ORDER BY n_admissions DESC, careunit LIMIT 5")

    variants = [
        Variant(SEMANTIC, "WITH dx AS (\n  SELECT DISTINCT hadm_id FROM diagnoses_icd d\n"
                          f"  WHERE {codes(c)}\n)\nSELECT i.last_careunit, "
                          "COUNT(DISTINCT i.hadm_id) AS n_admissions\nFROM icustays i JOIN dx ON "
                          "dx.hadm_id = i.hadm_id\nGROUP BY i.last_careunit\n"
                          "ORDER BY n_admissions DESC, i.last_careunit LIMIT 5",
                "'Last care unit' is the last_careunit column of icustays."),
        Variant(LOGIC, "SELECT t.careunit, COUNT(*) AS n_admissions\nFROM transfers t JOIN "
                       "diagnoses_icd d ON d.hadm_id = t.hadm_id\n"
                       f"WHERE {codes(c)} AND t.careunit IS NOT NULL\n"
                       "GROUP BY t.careunit ORDER BY n_admissions DESC, t.careunit LIMIT 5",
                "Joining transfers to the diagnosis rows and counting per care unit."),
        *code_variants(c, build),
    ]
    return Draft("demographics.last_careunit_top5", "Demographics", "population",
                  f"Across admissions in which {c.name} was coded, what are the 5 most common "
                  "last care units (the unit the patient was in right before discharge)?",
                  build(codes(c)),
                  "a list of [careunit, n_admissions] rows, most common first, ties by name",
                  ("transfers", "diagnoses_icd", "d_icd_diagnoses", "icustays"),
                  [code_lookup(c), "SELECT DISTINCT eventtype FROM transfers ORDER BY 1"],
                  variants, params={"concept": c.key})


def t_marital_by_location(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    loc = rng.choice(ctx.locations)
    base = (f"FROM admissions\nWHERE admission_location = '{loc}' AND marital_status IS NOT NULL\n"
            "GROUP BY marital_status ORDER BY n_patients DESC, marital_status")
    return Draft("demographics.marital_by_location", "Demographics", "population",
                  f"Among patients admitted via '{loc}', how many distinct patients are there in "
                  "each marital status (ignore missing marital status)?",
                  f"SELECT marital_status, COUNT(DISTINCT subject_id) AS n_patients\n{base}",
                  "a list of [marital_status, n_patients] rows, largest first, ties by name",
                  ("admissions",),
                  ["SELECT admission_location, COUNT(*) AS n FROM admissions "
                   "GROUP BY 1 ORDER BY 2 DESC, 1"],
                  [Variant(LOGIC, f"SELECT marital_status, COUNT(*) AS n_patients\n{base}",
                           "Counting rows per marital status.")],
                  params={"location": loc})


def t_max_hr_first12h(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    sid = rng.choice(ctx.long_icu_sids)

    def build(window: str) -> str:
        return ("WITH s AS (\n  SELECT stay_id, intime FROM icustays "
                f"WHERE subject_id = {sid}\n  ORDER BY intime LIMIT 1\n)\n"
                "SELECT MAX(c.valuenum) AS max_heart_rate\nFROM chartevents c JOIN s ON "
                f"c.stay_id = s.stay_id\nWHERE c.itemid = 226101{window}")

    return Draft("vitals.max_hr_first12h", "Vitals", "patient",
                  f"What was the highest heart rate charted for patient {sid} during the first "
                  "12 hours of their first ICU stay?",
                  build("\n  AND c.charttime < s.intime + INTERVAL 12 HOUR"),
                  "a single number, as [[value]]", ("icustays", "chartevents", "d_items"),
                  ["SELECT itemid, label FROM d_items WHERE label ILIKE '%heart%' ORDER BY itemid",
                   f"SELECT stay_id, hadm_id, intime, outtime FROM icustays WHERE subject_id = "
                   f"{sid} ORDER BY intime"],
                  [Variant(SEMANTIC, build(""), "Taking the maximum over the ICU stay."),
                   Variant(LOGIC, build("\n  AND CAST(c.charttime AS DATE) = "
                                        "CAST(s.intime AS DATE)"),
                           "Restricting to the first day of the stay."),
                   Variant(LOGIC, build("\n  AND c.charttime < s.intime + INTERVAL 12 DAY"),
                           "Restricting to the first 12 hours of the stay.")],
                  params={"subject_id": sid})


def t_avg_sbp_by_unit(ctx: Ctx, rng: random.Random, noise: bool) -> Draft | None:
    unit = rng.choice(ctx.icu_units)

    def build(item: int, col: str = "first_careunit") -> str:
        return ("SELECT ROUND(AVG(c.valuenum), 2) AS avg_sbp\nFROM chartevents c JOIN icustays i "
                f"ON i.stay_id = c.stay_id\nWHERE i.{col} = '{unit}' AND c.itemid = {item}")

    return Draft("vitals.avg_sbp_by_unit", "Vitals", "population",
                  "What is the average non-invasive systolic blood pressure over all "
                  f"measurements charted during ICU stays whose first care unit was {unit}?",
                  build(226104), "a single number rounded to 2 decimals, as [[value]]",
                  ("icustays", "chartevents", "d_items"),
                  ["SELECT itemid, label FROM d_items WHERE label ILIKE '%systolic%' "
                   "ORDER BY itemid"],
                  [Variant(CODE, build(226110),
                           "d_items lists a systolic pressure item 226110; using it."),
                   Variant(SEMANTIC, build(226104, "last_careunit"),
                           "Filtering stays on their care unit."),
                   Variant(LOGIC, "SELECT ROUND(AVG(stay_avg), 2) AS avg_sbp FROM (\n"
                                  "  SELECT c.stay_id, AVG(c.valuenum) AS stay_avg\n"
                                  "  FROM chartevents c JOIN icustays i ON i.stay_id = c.stay_id\n"
                                  f"  WHERE i.first_careunit = '{unit}' AND c.itemid = 226104\n"
                                  "  GROUP BY c.stay_id\n) per_stay",
                           "Averaging per stay first, then across stays.")],
                  params={"careunit": unit})
