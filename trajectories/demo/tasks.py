"""Task templates for the demo: questions, reference SQL, verified answers, and the plausible
wrong SQL that simulated agents write.

Each template draws its parameters from the generated database (so the clean answer is never
empty), executes its reference SQL, and stores the result as the ground truth.  Templates also
carry *variants*: coherent SQL that embodies one failure category (querying icustays instead
of transfers, ICD-10-only code lists, COUNT(*) over joined rows, ...).  Keeping the wrong SQL
next to the right SQL is what lets the agent simulator produce failures whose signals look like
the real thing, and lets tests check that a variant really changes the answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taxonomy import builtin_taxonomies
from trajectories.demo.ehr import CONCEPTS, LAB_ITEMS, Concept, LabItem
from trajectories.demo.sqlexec import SqlSandbox
from trajectories.model import Task

__all__ = [
    "FAILURE_CATEGORIES",
    "TaskSpec",
    "Variant",
    "make_tasks",
]

# The failure categories the simulated agents commit, by the EHR-Complex taxonomy's keys; the
# display names come from the taxonomy file, so renaming a category there renames it here.
_EHR_COMPLEX = builtin_taxonomies()["ehr_complex"]
SEMANTIC = _EHR_COMPLEX.category("semantic_misunderstanding").name
CODE = _EHR_COMPLEX.category("medical_code_lookup_error").name
LOGIC = _EHR_COMPLEX.category("sql_logic_error").name
SCOPE = _EHR_COMPLEX.category("variable_scope_error").name
FORMAT = _EHR_COMPLEX.category("answer_format_error").name
LOOP = _EHR_COMPLEX.category("stuck_in_loop").name
FAILURE_CATEGORIES = (SEMANTIC, CODE, LOGIC, SCOPE, FORMAT, LOOP)


@dataclass(frozen=True)
class Variant:
    """Wrong-but-plausible SQL and the reasoning an agent would give for writing it."""

    category: str
    sql: str
    note: str


@dataclass
class TaskSpec:
    """A task plus what the simulator needs to act on it."""

    task: Task
    tables: tuple[str, ...]
    lookups: list[str]  # dictionary/exploration SQL a careful agent runs first
    variants: list[Variant] = field(default_factory=list)
    probe: str | None = None  # noise tasks: the query that shows the evidence is missing
    probe_note: str | None = None
    relaxed: Variant | None = None  # noise tasks: what an agent runs when it ignores the noise


@dataclass
class _Draft:
    template_id: str
    intent: str
    scope: str
    question: str
    sql: str
    answer_format: str
    tables: tuple[str, ...]
    lookups: list[str]
    variants: list[Variant]
    noise: _Draft | None = None
    noise_type: str | None = None
    probe: str | None = None
    probe_note: str | None = None
    relaxed: Variant | None = None
    params: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

_ORD = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_KEYWORD = {
    "hypertension": "hypertension", "diabetes": "diabetes", "hyperlipidemia": "hyperlipidemia",
    "aki": "kidney failure", "chf": "heart failure", "pneumonia": "pneumonia",
    "afib": "atrial fibrillation", "copd": "obstructive", "depression": "depressive",
    "ileus": "ileus", "sepsis": "sep", "uti": "urinary tract", "hypokalemia": "kal",
    "tobacco": "nicotine", "cad": "atherosclero", "anemia": "anemia", "gerd": "reflux",
    "hypothyroidism": "hypothyroidism", "resp_failure": "respiratory failure",
    "ckd": "chronic kidney",
}
# Labs whose names do not exist in the database, used for query-level noise.
_MISSING_LAB = {
    "Lactate": "Lactate Dehydrogenase (LD)", "Creatinine": "Creatinine Clearance",
    "Potassium": "Potassium, Stool", "Sodium": "Sodium, Body Fluid",
    "Hemoglobin": "Hemoglobin A1c", "Platelet Count": "Platelet Aggregation",
    "Glucose": "Glucose, Fingerstick", "Magnesium": "Magnesium, Ionized",
    "Chloride": "Chloride, Sweat", "Urea Nitrogen": "Urea Nitrogen, Stool",
    "White Blood Cells": "White Blood Cells, Pleural", "Hematocrit": "Hematocrit, Ascites",
    "Bicarbonate": "Bicarbonate, CSF", "Troponin T": "Troponin I, High Sensitivity",
    "pH": "pH, Gastric", "Bilirubin, Total": "Bilirubin, Neonatal", "INR(PT)": "Anti-Xa Level",
    "Vancomycin": "Vancomycin Trough, Peritoneal",
}
_BLOOD_LABS = tuple(li for li in LAB_ITEMS if li.fluid == "Blood" and li.panel in ("bmp", "cbc"))
_URINE_TWIN = {li.label: li for li in LAB_ITEMS if li.fluid == "Urine"}


def _quote_list(codes: list[str]) -> str:
    return ", ".join(f"'{c}'" for c in codes)


def _codes(c: Concept, alias: str = "d") -> str:
    """Reference predicate: both ICD versions, version-qualified (codes can collide)."""
    nine = _quote_list([code for code, _ in c.icd9])
    ten = _quote_list([code for code, _ in c.icd10])
    return (f"(({alias}.icd_version = 9 AND {alias}.icd_code IN ({nine})) OR "
            f"({alias}.icd_version = 10 AND {alias}.icd_code IN ({ten})))")


def _codes_icd10_only(c: Concept, alias: str = "d") -> str:
    return f"{alias}.icd_code IN ({_quote_list([code for code, _ in c.icd10])})"


def _dotted(code: str) -> str:
    return code if len(code) <= 3 else f"{code[:3]}.{code[3:]}"


def _codes_dotted(c: Concept, alias: str = "d") -> str:
    codes = [_dotted(code) for code, _ in c.icd9] + [_dotted(code) for code, _ in c.icd10]
    return f"{alias}.icd_code IN ({_quote_list(codes)})"


def _code_lookup(c: Concept) -> str:
    return ("SELECT icd_code, icd_version, long_title FROM d_icd_diagnoses "
            f"WHERE long_title ILIKE '%{_KEYWORD[c.key]}%' ORDER BY icd_version, icd_code")


def _code_variants(c: Concept, make: Callable[[str], str]) -> list[Variant]:
    ten = ", ".join(code for code, _ in c.icd10)
    dotted = ", ".join(_dotted(code) for code, _ in (*c.icd9, *c.icd10))
    return [
        Variant(CODE, make(_codes_icd10_only(c)),
                f"The lookup returns several codes; I'll use the ICD-10 codes {ten} for "
                f"{c.name}."),
        Variant(CODE, make(_codes_dotted(c)),
                f"The standard codes for {c.name} are {dotted}; filtering on those."),
    ]


def _lab_lookup(label: str) -> str:
    word = label.split(",")[0].split("(")[0].strip()
    return ("SELECT itemid, label, fluid, category FROM d_labitems "
            f"WHERE label ILIKE '%{word}%' ORDER BY itemid")


def _lab_variant(lab: LabItem, make: Callable[[int], str]) -> list[Variant]:
    twin = _URINE_TWIN.get(lab.label)
    if twin is None:
        return []
    return [Variant(CODE, make(twin.itemid),
                    f"d_labitems has {lab.label} under itemid {twin.itemid}; using that item.")]


def _fake_lab_probe(label: str) -> str:
    return f"SELECT itemid, label, fluid FROM d_labitems WHERE label = '{label}'"


def _adm_cte(sid: int) -> str:
    return ("WITH adm AS (\n  SELECT hadm_id, admittime, "
            "ROW_NUMBER() OVER (ORDER BY admittime) AS rn\n"
            f"  FROM admissions WHERE subject_id = {sid}\n)")


def _adm_cte_by_id(sid: int) -> str:
    # Ordering admissions by hadm_id looks natural but hadm_id is not chronological.
    return ("WITH adm AS (\n  SELECT hadm_id, admittime, "
            "ROW_NUMBER() OVER (ORDER BY hadm_id) AS rn\n"
            f"  FROM admissions WHERE subject_id = {sid}\n)")


def _adm_list(sid: int) -> str:
    return (f"SELECT hadm_id, admittime, dischtime FROM admissions WHERE subject_id = {sid} "
            "ORDER BY admittime")


class _Ctx:
    """Parameter pools drawn once from the database."""

    def __init__(self, db: SqlSandbox) -> None:
        self.db = db
        rows = db.run("SELECT subject_id, COUNT(*) FROM admissions GROUP BY 1 ORDER BY 1").rows
        self.n_adm = {int(s): int(n) for s, n in rows}
        self.sids = sorted(self.n_adm)
        self.multi = [s for s in self.sids if self.n_adm[s] >= 2]
        self.icu_sids = [int(r[0]) for r in db.run(
            "SELECT DISTINCT subject_id FROM icustays ORDER BY 1").rows]
        self.icu_units = [str(r[0]) for r in db.run(
            "SELECT first_careunit FROM icustays GROUP BY 1 HAVING COUNT(*) >= 5 ORDER BY 1").rows]
        self.locations = [str(r[0]) for r in db.run(
            "SELECT admission_location FROM admissions GROUP BY 1 HAVING COUNT(*) >= 10 "
            "ORDER BY 1").rows]
        years = db.run("SELECT MIN(EXTRACT(YEAR FROM admittime)), "
                       "MAX(EXTRACT(YEAR FROM admittime)) FROM admissions").rows[0]
        self.year_lo, self.year_hi = int(years[0]), int(years[1])
        self.long_icu_sids = [int(r[0]) for r in db.run(
            "SELECT subject_id FROM icustays GROUP BY 1 HAVING MIN(los) >= 1.5 ORDER BY 1").rows]
        self._sid_set = set(self.sids)

    def missing_sid(self, near: int) -> int:
        """An id that looks like its neighbours but belongs to nobody (record-level noise)."""
        cand = near + 1
        while cand in self._sid_set:
            cand += 1
        return cand


# --------------------------------------------------------------------------------------------
# templates: each returns a clean draft (optionally carrying its noise twin) or None to retry
# --------------------------------------------------------------------------------------------

Template = Callable[[_Ctx, random.Random, bool], "_Draft | None"]


def _record_noise(ctx: _Ctx, draft: _Draft, sid: int, build: Callable[[int], str],
                  question: Callable[[int], str]) -> None:
    bad = ctx.missing_sid(sid)
    draft.noise = _Draft(
        draft.template_id, draft.intent, draft.scope, question(bad), build(bad),
        draft.answer_format, draft.tables, [_adm_list(bad)],
        [], noise_type="record",
        probe=f"SELECT * FROM patients WHERE subject_id = {bad}",
        probe_note=f"There is no patient {bad} in the database, so the question cannot be "
                   "answered from the record.",
        relaxed=Variant(SEMANTIC, build(sid),
                        f"Patient {bad} does not exist; {sid} is the closest id, probably a typo. "
                        f"Using {sid}."),
        params={**draft.params, "subject_id": bad},
    )


def t_age_at_admission(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sid = rng.choice(ctx.sids)
    k = rng.randint(1, min(ctx.n_adm[sid], 4))

    def build(s: int, cte: Callable[[int], str] = _adm_cte) -> str:
        return (f"{cte(s)}\nSELECT p.anchor_age + (EXTRACT(YEAR FROM adm.admittime) - "
                f"p.anchor_year) AS age_at_admission\nFROM adm JOIN patients p ON p.subject_id = "
                f"{s}\nWHERE adm.rn = {k}")

    def question(s: int) -> str:
        return f"How old was patient {s} at the time of their {_ORD[k]} hospital admission?"

    d = _Draft("demographics.age_at_admission", "Demographics", "patient", question(sid),
               build(sid), "a single integer (age in years), as [[age]]",
               ("patients", "admissions"),
               [f"SELECT * FROM patients WHERE subject_id = {sid}", _adm_list(sid)],
               [Variant(SEMANTIC, f"SELECT anchor_age FROM patients WHERE subject_id = {sid}",
                        "anchor_age is the patient's age, so I can read it directly."),
                Variant(LOGIC, build(sid, _adm_cte_by_id),
                        "Numbering the admissions by hadm_id to find the requested one.")],
               params={"subject_id": sid, "k": k})
    if noise:
        _record_noise(ctx, d, sid, build, question)
    return d


def t_careunit_path(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
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
    d = _Draft("demographics.careunit_path", "Demographics", "patient", question(sid),
               build(sid), "a list of [careunit] rows in chronological order",
               ("transfers", "admissions", "icustays"),
               [_adm_list(sid), "SELECT DISTINCT eventtype FROM transfers ORDER BY 1"],
               variants, params={"subject_id": sid})
    if noise:
        _record_noise(ctx, d, sid, build, question)
    return d


def t_last_careunit_top5(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
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
                          f"  WHERE {_codes(c)}\n)\nSELECT i.last_careunit, "
                          "COUNT(DISTINCT i.hadm_id) AS n_admissions\nFROM icustays i JOIN dx ON "
                          "dx.hadm_id = i.hadm_id\nGROUP BY i.last_careunit\n"
                          "ORDER BY n_admissions DESC, i.last_careunit LIMIT 5",
                "'Last care unit' is the last_careunit column of icustays."),
        Variant(LOGIC, "SELECT t.careunit, COUNT(*) AS n_admissions\nFROM transfers t JOIN "
                       "diagnoses_icd d ON d.hadm_id = t.hadm_id\n"
                       f"WHERE {_codes(c)} AND t.careunit IS NOT NULL\n"
                       "GROUP BY t.careunit ORDER BY n_admissions DESC, t.careunit LIMIT 5",
                "Joining transfers to the diagnosis rows and counting per care unit."),
        *_code_variants(c, build),
    ]
    return _Draft("demographics.last_careunit_top5", "Demographics", "population",
                  f"Across admissions in which {c.name} was coded, what are the 5 most common "
                  "last care units (the unit the patient was in right before discharge)?",
                  build(_codes(c)),
                  "a list of [careunit, n_admissions] rows, most common first, ties by name",
                  ("transfers", "diagnoses_icd", "d_icd_diagnoses", "icustays"),
                  [_code_lookup(c), "SELECT DISTINCT eventtype FROM transfers ORDER BY 1"],
                  variants, params={"concept": c.key})


def t_marital_by_location(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    loc = rng.choice(ctx.locations)
    base = (f"FROM admissions\nWHERE admission_location = '{loc}' AND marital_status IS NOT NULL\n"
            "GROUP BY marital_status ORDER BY n_patients DESC, marital_status")
    return _Draft("demographics.marital_by_location", "Demographics", "population",
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


def t_max_hr_first12h(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sid = rng.choice(ctx.long_icu_sids)

    def build(window: str) -> str:
        return ("WITH s AS (\n  SELECT stay_id, intime FROM icustays "
                f"WHERE subject_id = {sid}\n  ORDER BY intime LIMIT 1\n)\n"
                "SELECT MAX(c.valuenum) AS max_heart_rate\nFROM chartevents c JOIN s ON "
                f"c.stay_id = s.stay_id\nWHERE c.itemid = 226101{window}")

    return _Draft("vitals.max_hr_first12h", "Vitals", "patient",
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


def t_avg_sbp_by_unit(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    unit = rng.choice(ctx.icu_units)

    def build(item: int, col: str = "first_careunit") -> str:
        return ("SELECT ROUND(AVG(c.valuenum), 2) AS avg_sbp\nFROM chartevents c JOIN icustays i "
                f"ON i.stay_id = c.stay_id\nWHERE i.{col} = '{unit}' AND c.itemid = {item}")

    return _Draft("vitals.avg_sbp_by_unit", "Vitals", "population",
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


def t_drugs_kth_admission(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sid = rng.choice(ctx.multi if rng.random() < 0.7 else ctx.sids)
    k = rng.randint(1, min(ctx.n_adm[sid], 3))

    def build(s: int, cte: Callable[[int], str] = _adm_cte) -> str:
        return (f"{cte(s)}\nSELECT p.drug, COUNT(*) AS n_prescriptions\nFROM prescriptions p "
                f"JOIN adm ON adm.hadm_id = p.hadm_id\nWHERE adm.rn = {k}\n"
                "GROUP BY p.drug ORDER BY n_prescriptions DESC, p.drug")

    def question(s: int) -> str:
        return (f"Which drugs were prescribed to patient {s} during their {_ORD[k]} hospital "
                "admission, and how many times was each prescribed?")

    variants = [
        Variant(LOGIC, build(sid, _adm_cte_by_id), "Numbering admissions by hadm_id."),
        Variant(SEMANTIC, "SELECT drug, COUNT(*) AS n_prescriptions FROM prescriptions\n"
                          f"WHERE subject_id = {sid}\nGROUP BY drug "
                          "ORDER BY n_prescriptions DESC, drug",
                "Counting the patient's prescriptions per drug."),
    ]
    d = _Draft("medications.drugs_kth_admission", "Medications", "patient", question(sid),
               build(sid), "a list of [drug, n_prescriptions] rows, most frequent first, ties "
               "by drug name", ("prescriptions", "admissions"), [_adm_list(sid)], variants,
               params={"subject_id": sid, "k": k})
    if noise:
        _record_noise(ctx, d, sid, build, question)
    return d


def t_top5_drugs_dx_lab(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
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
                       f"WHERE {_codes(c)} AND l.itemid = {lab.itemid}\n"
                       "GROUP BY p.drug ORDER BY n_admissions DESC, p.drug LIMIT 5",
                "Joining prescriptions, diagnoses and labs on hadm_id and counting."),
        *_code_variants(c, build),
        *_lab_variant(lab, lambda item: build(_codes(c), f"l.itemid = {item}")),
    ]
    d = _Draft("medications.top5_drugs_dx_lab", "Medications", "population", question(lab.label),
               build(_codes(c)), "a list of [drug, n_admissions] rows, most admissions first, "
               "ties by drug name",
               ("prescriptions", "diagnoses_icd", "labevents", "d_labitems", "d_icd_diagnoses"),
               [_code_lookup(c), _lab_lookup(lab.label)], variants,
               params={"concept": c.key, "itemid": lab.itemid})
    if noise and lab.label in _MISSING_LAB:
        fake = _MISSING_LAB[lab.label]
        fake_sql = build(_codes(c), f"l.itemid IN (SELECT itemid FROM d_labitems WHERE label = "
                                    f"'{fake}')")
        d.noise = _Draft(d.template_id, d.intent, d.scope, question(fake), fake_sql,
                         d.answer_format, d.tables, [_code_lookup(c), _lab_lookup(fake)], [],
                         noise_type="query",
                         probe=_fake_lab_probe(fake),
                         probe_note=f"There is no '{fake}' test in d_labitems, so no admission "
                                    "can satisfy the condition.",
                         relaxed=Variant(SEMANTIC, build(_codes(c)),
                                         f"No exact '{fake}' item; {lab.label} (itemid "
                                         f"{lab.itemid}) is the closest match, using it."),
                         params={"concept": c.key, "lab": fake})
    return d


def t_insurance_drg_latest(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sid = rng.choice(ctx.multi)

    def build(s: int, order: str = "a.admittime DESC") -> str:
        return ("SELECT a.insurance, g.description\nFROM admissions a JOIN drgcodes g ON "
                "g.hadm_id = a.hadm_id AND g.drg_type = 'APR'\n"
                f"WHERE a.subject_id = {s}\nORDER BY {order} LIMIT 1")

    def question(s: int) -> str:
        return (f"For patient {s}'s most recent hospital admission, what insurance was recorded "
                "and what was the APR-DRG description?")

    d = _Draft("cost.insurance_drg_latest", "Cost", "patient", question(sid), build(sid),
               "one row [insurance, drg_description]", ("admissions", "drgcodes"),
               [_adm_list(sid), "SELECT DISTINCT drg_type FROM drgcodes ORDER BY 1"],
               [Variant(SEMANTIC, build(sid, "a.admittime ASC"),
                        "Looking at the patient's index admission."),
                Variant(LOGIC, build(sid, "a.hadm_id DESC"),
                        "The latest admission has the largest hadm_id.")],
               params={"subject_id": sid})
    if noise:
        _record_noise(ctx, d, sid, build, question)
    return d


def t_insurance_by_severity(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sev = rng.randint(1, 4)

    def build(cond: str, agg: str = "COUNT(DISTINCT a.subject_id)") -> str:
        return (f"SELECT a.insurance, {agg} AS n_patients\nFROM admissions a JOIN drgcodes g ON "
                f"g.hadm_id = a.hadm_id\nWHERE g.drg_type = 'APR' AND g.drg_severity {cond}\n"
                "GROUP BY a.insurance ORDER BY n_patients DESC, a.insurance")

    def question(s: int) -> str:
        return (f"For admissions with an APR-DRG severity of {s}, how many distinct patients "
                "were covered by each insurance type?")

    fmt = "a list of [insurance, n_patients] rows, largest first, ties by name"
    d = _Draft("cost.insurance_by_severity", "Cost", "population", question(sev),
               build(f"= {sev}"), fmt, ("admissions", "drgcodes"),
               ["SELECT drg_type, drg_severity, COUNT(*) FROM drgcodes "
                "GROUP BY 1, 2 ORDER BY 1, 2"],
               [Variant(LOGIC, build(f"= {sev}", "COUNT(*)"), "Counting admissions per insurance."),
                Variant(SEMANTIC, build(f">= {sev}"),
                        f"Including admissions of severity {sev} or higher.")],
               params={"severity": sev})
    if noise:
        bad = rng.choice((6, 7, 9))
        d.noise = _Draft(d.template_id, d.intent, d.scope, question(bad), build(f"= {bad}"), fmt,
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


def t_medicare_share_dx(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    c = rng.choice(CONCEPTS)

    def build(pred: str) -> str:
        return ("WITH dx AS (\n  SELECT DISTINCT hadm_id FROM diagnoses_icd d\n"
                f"  WHERE {pred}\n)\nSELECT ROUND(100.0 * AVG(CASE WHEN a.insurance = 'Medicare' "
                "THEN 1 ELSE 0 END), 2) AS pct_medicare\nFROM admissions a JOIN dx ON "
                "dx.hadm_id = a.hadm_id")

    return _Draft("cost.medicare_share_dx", "Cost", "population",
                  f"Among admissions in which {c.name} was coded, what percentage were covered by "
                  "Medicare?", build(_codes(c)), "a single percentage rounded to 2 decimals, as "
                  "[[value]]", ("admissions", "diagnoses_icd", "d_icd_diagnoses"),
                  [_code_lookup(c), "SELECT DISTINCT insurance FROM admissions ORDER BY 1"],
                  [Variant(SEMANTIC, "WITH pts AS (\n  SELECT DISTINCT subject_id FROM "
                                     f"diagnoses_icd d\n  WHERE {_codes(c)}\n)\n"
                                     "SELECT ROUND(100.0 * AVG(CASE WHEN a.insurance = 'Medicare' "
                                     "THEN 1 ELSE 0 END), 2) AS pct_medicare\nFROM admissions a "
                                     "JOIN pts ON pts.subject_id = a.subject_id",
                           f"Taking all admissions of the patients with {c.name}."),
                   Variant(LOGIC, "SELECT ROUND(100.0 * AVG(CASE WHEN a.insurance = 'Medicare' "
                                  "THEN 1 ELSE 0 END), 2) AS pct_medicare\nFROM admissions a JOIN "
                                  "diagnoses_icd d ON d.subject_id = a.subject_id\n"
                                  f"WHERE {_codes(c)}",
                           "Joining admissions to their diagnosis rows."),
                   *_code_variants(c, build)],
                  params={"concept": c.key})


def t_first_lab_kth_admission(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sid = rng.choice(ctx.multi if rng.random() < 0.6 else ctx.sids)
    k = rng.randint(1, min(ctx.n_adm[sid], 3))
    lab = rng.choice(_BLOOD_LABS)

    def build(s: int, item: int = lab.itemid, order: str = "l.charttime, l.labevent_id",
              cte: Callable[[int], str] = _adm_cte) -> str:
        return (f"{cte(s)}\nSELECT l.valuenum\nFROM labevents l JOIN adm ON adm.hadm_id = "
                f"l.hadm_id\nWHERE adm.rn = {k} AND l.itemid = {item}\nORDER BY {order} LIMIT 1")

    def question(s: int) -> str:
        return (f"What was the first {lab.label.lower()} result for patient {s} during their "
                f"{_ORD[k]} hospital admission?")

    d = _Draft("labs.first_value_kth_admission", "Labs", "patient", question(sid), build(sid),
               "a single number, as [[value]]", ("labevents", "d_labitems", "admissions"),
               [_lab_lookup(lab.label), _adm_list(sid)],
               [Variant(LOGIC, build(sid, order="l.charttime DESC"),
                        "Ordering the results by time to pick the value."),
                Variant(SEMANTIC, "SELECT valuenum FROM labevents\nWHERE subject_id = "
                                  f"{sid} AND itemid = {lab.itemid}\nORDER BY charttime, "
                                  "labevent_id LIMIT 1",
                        "Taking the patient's first result."),
                *_lab_variant(lab, lambda item: build(sid, item))],
               params={"subject_id": sid, "k": k, "itemid": lab.itemid})
    if noise:
        _record_noise(ctx, d, sid, build, question)
    return d


def t_count_tests_next_admission(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sid = rng.choice(ctx.multi)
    lab = rng.choice(_BLOOD_LABS)

    def build(item: int = lab.itemid, rn: int = 2, cte: Callable[[int], str] = _adm_cte) -> str:
        return (f"{cte(sid)}\nSELECT COUNT(*) AS n_tests\nFROM labevents l JOIN adm ON "
                f"adm.hadm_id = l.hadm_id\nWHERE adm.rn = {rn} AND l.itemid = {item}")

    ref = build()
    if ctx.db.run(ref).rows[0][0] == 0:
        return None  # a zero count is a legitimate answer but a dull task; redraw
    return _Draft("labs.count_tests_next_admission", "Labs", "patient",
                  f"During the hospitalization immediately following patient {sid}'s first "
                  f"admission, how many {lab.label.lower()} tests were performed?", ref,
                  "a single integer, as [[count]]", ("labevents", "d_labitems", "admissions"),
                  [_lab_lookup(lab.label), _adm_list(sid)],
                  [Variant(LOGIC, build(cte=_adm_cte_by_id), "Numbering admissions by hadm_id."),
                   Variant(SEMANTIC, build(rn=1), "Counting tests in the first admission."),
                   *_lab_variant(lab, lambda item: build(item))],
                  params={"subject_id": sid, "itemid": lab.itemid})


def t_first_exceed_time(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    lab = rng.choice([li for li in _BLOOD_LABS if li.label in
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
    d = _Draft("labs.first_exceed_time", "Labs", "patient", question(thr), build(thr), fmt,
               ("labevents", "d_labitems"), [_lab_lookup(lab.label)],
               [Variant(LOGIC, build(thr, order="l.valuenum DESC"),
                        "Sorting the qualifying results to find the one that exceeded it."),
                Variant(SEMANTIC, "SELECT l.charttime\nFROM labevents l\nWHERE l.subject_id = "
                                  f"{sid} AND l.itemid = {lab.itemid}\n"
                                  "ORDER BY l.charttime LIMIT 1",
                        "Taking the time of the first measurement."),
                *_lab_variant(lab, lambda item: build(thr).replace(
                    f"itemid = {lab.itemid}", f"itemid = {item}"))],
               params={"subject_id": sid, "itemid": lab.itemid, "threshold": thr})
    if noise:
        bad = round(thr * 10, 1)
        d.noise = _Draft(d.template_id, d.intent, d.scope, question(bad), build(bad), fmt,
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


def t_top5_icd_with_lab(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
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
    d = _Draft("labs.top5_icd_with_lab", "Labs", "population", question(lab.label),
               build(f"l.itemid = {lab.itemid}"), fmt,
               ("labevents", "d_labitems", "diagnoses_icd"), [_lab_lookup(lab.label)],
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
                *_lab_variant(lab, lambda item: build(f"l.itemid = {item}"))],
               params={"itemid": lab.itemid})
    if noise and lab.label in _MISSING_LAB:
        fake = _MISSING_LAB[lab.label]
        d.noise = _Draft(d.template_id, d.intent, d.scope, question(fake),
                         build(f"l.itemid IN (SELECT itemid FROM d_labitems WHERE label = "
                               f"'{fake}')"), fmt, d.tables, [_lab_lookup(fake)], [],
                         noise_type="query",
                         probe=_fake_lab_probe(fake),
                         probe_note=f"No '{fake}' test exists in d_labitems, so the cohort is "
                                    "empty.",
                         relaxed=Variant(SEMANTIC, build(f"l.itemid = {lab.itemid}"),
                                         f"'{fake}' is not listed; {lab.label} is the closest "
                                         "test, using it."),
                         params={"lab": fake})
    return d


def t_avg_lab_dx(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    c = rng.choice(CONCEPTS)
    lab = rng.choice(_BLOOD_LABS)

    def build(pred: str) -> str:
        return ("SELECT ROUND(AVG(l.valuenum), 2) AS mean_value\nFROM labevents l\n"
                f"WHERE l.itemid = {lab.itemid} AND l.hadm_id IN (\n"
                f"  SELECT d.hadm_id FROM diagnoses_icd d WHERE {pred}\n)")

    return _Draft("labs.avg_value_dx", "Labs", "population",
                  f"What is the mean blood {lab.label.lower()} value over all measurements taken "
                  f"during admissions in which {c.name} was coded?",
                  build(_codes(c)), "a single number rounded to 2 decimals, as [[value]]",
                  ("labevents", "d_labitems", "diagnoses_icd", "d_icd_diagnoses"),
                  [_code_lookup(c), _lab_lookup(lab.label)],
                  [Variant(LOGIC, "SELECT ROUND(AVG(l.valuenum), 2) AS mean_value\n"
                                  "FROM labevents l JOIN diagnoses_icd d ON d.subject_id = "
                                  f"l.subject_id\nWHERE l.itemid = {lab.itemid} AND {_codes(c)}",
                           "Joining labs to diagnoses and averaging."),
                   *_code_variants(c, build)],
                  params={"concept": c.key, "itemid": lab.itemid})


def t_primary_codes(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    sid = rng.choice(ctx.multi)

    def build(s: int, order: str = "a.admittime") -> str:
        return ("SELECT d.icd_code, d.icd_version\nFROM diagnoses_icd d JOIN admissions a ON "
                f"a.hadm_id = d.hadm_id\nWHERE a.subject_id = {s} AND d.seq_num = 1\n"
                f"ORDER BY {order}")

    def question(s: int) -> str:
        return (f"List the primary diagnosis code (sequence number 1) of each of patient {s}'s "
                "admissions in chronological order, with its ICD version.")

    d = _Draft("diagnoses.primary_codes", "Diagnoses", "patient", question(sid), build(sid),
               "a list of [icd_code, icd_version] rows in admission order",
               ("diagnoses_icd", "admissions"), [_adm_list(sid)],
               [Variant(LOGIC, build(sid, "d.hadm_id"), "Ordering by admission id."),
                Variant(SEMANTIC, "SELECT d.icd_code, d.icd_version\nFROM diagnoses_icd d "
                                  f"JOIN admissions a ON a.hadm_id = d.hadm_id\nWHERE "
                                  f"a.subject_id = {sid} AND d.seq_num = (\n  SELECT "
                                  "MIN(seq_num) FROM diagnoses_icd)\nORDER BY a.admittime "
                                  "DESC", "Primary means the top-ranked code; newest first.")],
               params={"subject_id": sid})
    if noise:
        _record_noise(ctx, d, sid, build, question)
    return d


def t_count_admissions_dx(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    c = rng.choice(CONCEPTS)
    pool = [int(r[0]) for r in ctx.db.run(
        f"SELECT DISTINCT subject_id FROM diagnoses_icd d WHERE {_codes(c)} ORDER BY 1").rows]
    if not pool:
        return None
    sid = rng.choice(pool)

    def build(pred: str) -> str:
        return ("SELECT COUNT(DISTINCT d.hadm_id) AS n_admissions\nFROM diagnoses_icd d\n"
                f"WHERE d.subject_id = {sid} AND ({pred})")

    return _Draft("diagnoses.count_admissions_dx", "Diagnoses", "patient",
                  f"In how many of patient {sid}'s hospital admissions was {c.name} coded?",
                  build(_codes(c)), "a single integer, as [[count]]",
                  ("diagnoses_icd", "d_icd_diagnoses"), [_code_lookup(c)],
                  [Variant(LOGIC, "SELECT COUNT(*) AS n_admissions\nFROM diagnoses_icd d\n"
                                  f"WHERE d.subject_id = {sid}",
                           "Counting the patient's diagnosis rows."),
                   *_code_variants(c, build)],
                  params={"subject_id": sid, "concept": c.key})


def t_patients_dx_since_year(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
    c = rng.choice(CONCEPTS)
    year = rng.randint(ctx.year_lo + 20, ctx.year_hi - 10)

    def build(pred: str, agg: str = "COUNT(DISTINCT d.subject_id)",
              time: str = f"a.admittime >= TIMESTAMP '{year}-01-01 00:00:00'") -> str:
        return (f"SELECT {agg} AS n_patients\nFROM diagnoses_icd d JOIN admissions a ON "
                f"a.hadm_id = d.hadm_id\nWHERE ({pred})\n  AND {time}")

    return _Draft("diagnoses.patients_dx_since_year", "Diagnoses", "population",
                  f"How many distinct patients had {c.name} coded during an admission that "
                  f"began in {year} or later?", build(_codes(c)),
                  "a single integer, as [[count]]",
                  ("diagnoses_icd", "d_icd_diagnoses", "admissions"), [_code_lookup(c)],
                  [Variant(LOGIC, build(_codes(c), agg="COUNT(*)"),
                           "Counting the matching diagnosis rows."),
                   Variant(LOGIC, build(_codes(c), time=f"a.dischtime > TIMESTAMP "
                                                        f"'{year}-12-31 00:00:00'"),
                           f"Keeping admissions after {year}."),
                   *_code_variants(c, build)],
                  params={"concept": c.key, "year": year})


def t_days_to_readmission(ctx: _Ctx, rng: random.Random, noise: bool) -> _Draft | None:
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

    return _Draft("diagnoses.days_to_readmission", "Diagnoses", "population",
                  f"Across the cohort, what is the mean number of days from a patient's first "
                  f"admission coded with {c.name} to their next admission (patients without a "
                  "later admission are excluded)?", build(_codes(c)),
                  "a single number of days rounded to 2 decimals, as [[value]]",
                  ("diagnoses_icd", "d_icd_diagnoses", "admissions"), [_code_lookup(c)],
                  [Variant(LOGIC, build(_codes(c), next_only=False),
                           "Measuring the gap to the later admissions."),
                   *_code_variants(c, build)],
                  params={"concept": c.key})


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
)


def _spec(d: _Draft, task_id: str, gt: Any, pair_id: str | None, variant: str | None) -> TaskSpec:
    # params is an extra field (the native format keeps unknown fields)
    task = Task.model_validate({
        "id": task_id, "question": d.question, "intent": d.intent, "scope": d.scope,
        "template_id": d.template_id, "reference_sql": d.sql, "ground_truth": gt,
        "answer_format": d.answer_format, "split": "test", "pair_id": pair_id,
        "noise_type": d.noise_type, "variant": variant, "params": d.params,
    })
    return TaskSpec(task, d.tables, d.lookups, d.variants, d.probe, d.probe_note, d.relaxed)


def make_tasks(db: SqlSandbox, *, seed: int, n_tasks: int = 72) -> list[TaskSpec]:
    """Draw ``n_tasks`` tasks (Clean/Noise pairs count as two) and verify every answer by
    executing its reference SQL.  Templates are visited round-robin so any ``n_tasks`` >= 40
    covers all six intents at both scopes."""
    rng = random.Random(f"tasks|{seed}")
    ctx = _Ctx(db)
    specs: list[TaskSpec] = []
    visits = [0] * len(TEMPLATES)
    seen: set[str] = set()
    i = 0
    while len(specs) < n_tasks:
        t_index = i % len(TEMPLATES)
        i += 1
        template, pairable = TEMPLATES[t_index]
        want_pair = pairable and visits[t_index] % 2 == 0 and n_tasks - len(specs) >= 2
        visits[t_index] += 1
        chosen: tuple[_Draft, Any] | None = None
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
        if i > 50 * (n_tasks + len(TEMPLATES)):
            raise RuntimeError("could not draw enough answerable tasks; is the database empty?")
    return specs
