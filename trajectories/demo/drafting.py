"""What demo task templates are made of: the failure categories, a task draft and its wrong-SQL
variants, the parameter pools drawn from the database, and the SQL fragments templates share
(code lists, dictionary look-ups, admission numbering).

The templates themselves live in ``templates_*`` modules by clinical area; ``tasks`` draws tasks
from them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taxonomy import builtin_taxonomies, keys
from trajectories.demo.ehr import LAB_ITEMS, Concept, LabItem
from trajectories.demo.sqlexec import DemoDatabase
from trajectories.model import Task

__all__ = [
    "BLOOD_LABS",
    "CODE",
    "FAILURE_CATEGORIES",
    "FORMAT",
    "KEYWORD",
    "LOGIC",
    "LOOP",
    "MISSING_LAB",
    "ORD",
    "SCOPE",
    "SEMANTIC",
    "URINE_TWIN",
    "Ctx",
    "Draft",
    "TaskSpec",
    "Template",
    "Variant",
    "adm_cte",
    "adm_cte_by_id",
    "adm_list",
    "code_lookup",
    "code_variants",
    "codes",
    "codes_dotted",
    "codes_icd10_only",
    "dotted",
    "fake_lab_probe",
    "lab_lookup",
    "lab_variant",
    "quote_list",
    "record_noise",
]

# The failure categories the simulated agents commit, by the EHR-Complex taxonomy's keys; the
# display names come from the taxonomy file, so renaming a category there renames it here.
_EHR_COMPLEX = builtin_taxonomies()[keys.EHR_COMPLEX]
SEMANTIC = _EHR_COMPLEX.category(keys.SEMANTIC_MISUNDERSTANDING).name
CODE = _EHR_COMPLEX.category(keys.MEDICAL_CODE_LOOKUP_ERROR).name
LOGIC = _EHR_COMPLEX.category(keys.SQL_LOGIC_ERROR).name
SCOPE = _EHR_COMPLEX.category(keys.VARIABLE_SCOPE_ERROR).name
FORMAT = _EHR_COMPLEX.category(keys.ANSWER_FORMAT_ERROR).name
LOOP = _EHR_COMPLEX.category(keys.STUCK_IN_LOOP).name
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
class Draft:
    template_id: str
    intent: str
    scope: str
    question: str
    sql: str
    answer_format: str
    tables: tuple[str, ...]
    lookups: list[str]
    variants: list[Variant]
    noise: Draft | None = None
    noise_type: str | None = None
    probe: str | None = None
    probe_note: str | None = None
    relaxed: Variant | None = None
    params: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

ORD = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
KEYWORD = {
    "hypertension": "hypertension", "diabetes": "diabetes", "hyperlipidemia": "hyperlipidemia",
    "aki": "kidney failure", "chf": "heart failure", "pneumonia": "pneumonia",
    "afib": "atrial fibrillation", "copd": "obstructive", "depression": "depressive",
    "ileus": "ileus", "sepsis": "sep", "uti": "urinary tract", "hypokalemia": "kal",
    "tobacco": "nicotine", "cad": "atherosclero", "anemia": "anemia", "gerd": "reflux",
    "hypothyroidism": "hypothyroidism", "resp_failure": "respiratory failure",
    "ckd": "chronic kidney",
}
# Labs whose names do not exist in the database, used for query-level noise.
MISSING_LAB = {
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
BLOOD_LABS = tuple(li for li in LAB_ITEMS if li.fluid == "Blood" and li.panel in ("bmp", "cbc"))
URINE_TWIN = {li.label: li for li in LAB_ITEMS if li.fluid == "Urine"}


def quote_list(codes: list[str]) -> str:
    return ", ".join(f"'{c}'" for c in codes)


def codes(c: Concept, alias: str = "d") -> str:
    """Reference predicate: both ICD versions, version-qualified (codes can collide)."""
    nine = quote_list([code for code, _ in c.icd9])
    ten = quote_list([code for code, _ in c.icd10])
    return (f"(({alias}.icd_version = 9 AND {alias}.icd_code IN ({nine})) OR "
            f"({alias}.icd_version = 10 AND {alias}.icd_code IN ({ten})))")


def codes_icd10_only(c: Concept, alias: str = "d") -> str:
    return f"{alias}.icd_code IN ({quote_list([code for code, _ in c.icd10])})"


def dotted(code: str) -> str:
    return code if len(code) <= 3 else f"{code[:3]}.{code[3:]}"


def codes_dotted(c: Concept, alias: str = "d") -> str:
    listed = [dotted(code) for code, _ in c.icd9] + [dotted(code) for code, _ in c.icd10]
    return f"{alias}.icd_code IN ({quote_list(listed)})"


def code_lookup(c: Concept) -> str:
    return ("SELECT icd_code, icd_version, long_title FROM d_icd_diagnoses "
            f"WHERE long_title ILIKE '%{KEYWORD[c.key]}%' ORDER BY icd_version, icd_code")


def code_variants(c: Concept, make: Callable[[str], str]) -> list[Variant]:
    ten = ", ".join(code for code, _ in c.icd10)
    written = ", ".join(dotted(code) for code, _ in (*c.icd9, *c.icd10))
    return [
        Variant(CODE, make(codes_icd10_only(c)),
                f"The lookup returns several codes; I'll use the ICD-10 codes {ten} for "
                f"{c.name}."),
        Variant(CODE, make(codes_dotted(c)),
                f"The standard codes for {c.name} are {written}; filtering on those."),
    ]


def lab_lookup(label: str) -> str:
    word = label.split(",")[0].split("(")[0].strip()
    return ("SELECT itemid, label, fluid, category FROM d_labitems "
            f"WHERE label ILIKE '%{word}%' ORDER BY itemid")


def lab_variant(lab: LabItem, make: Callable[[int], str]) -> list[Variant]:
    twin = URINE_TWIN.get(lab.label)
    if twin is None:
        return []
    return [Variant(CODE, make(twin.itemid),
                    f"d_labitems has {lab.label} under itemid {twin.itemid}; using that item.")]


def fake_lab_probe(label: str) -> str:
    return f"SELECT itemid, label, fluid FROM d_labitems WHERE label = '{label}'"


def adm_cte(sid: int) -> str:
    return ("WITH adm AS (\n  SELECT hadm_id, admittime, "
            "ROW_NUMBER() OVER (ORDER BY admittime) AS rn\n"
            f"  FROM admissions WHERE subject_id = {sid}\n)")


def adm_cte_by_id(sid: int) -> str:
    # Ordering admissions by hadm_id looks natural but hadm_id is not chronological.
    return ("WITH adm AS (\n  SELECT hadm_id, admittime, "
            "ROW_NUMBER() OVER (ORDER BY hadm_id) AS rn\n"
            f"  FROM admissions WHERE subject_id = {sid}\n)")


def adm_list(sid: int) -> str:
    return (f"SELECT hadm_id, admittime, dischtime FROM admissions WHERE subject_id = {sid} "
            "ORDER BY admittime")


class Ctx:
    """Parameter pools drawn once from the database."""

    def __init__(self, db: DemoDatabase) -> None:
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


# A template returns a clean draft (optionally carrying its noise twin) or None to retry.
Template = Callable[[Ctx, random.Random, bool], "Draft | None"]


def record_noise(ctx: Ctx, draft: Draft, sid: int, build: Callable[[int], str],
                  question: Callable[[int], str]) -> None:
    bad = ctx.missing_sid(sid)
    draft.noise = Draft(
        draft.template_id, draft.intent, draft.scope, question(bad), build(bad),
        draft.answer_format, draft.tables, [adm_list(bad)],
        [], noise_type="record",
        probe=f"SELECT * FROM patients WHERE subject_id = {bad}",
        probe_note=f"There is no patient {bad} in the database, so the question cannot be "
                   "answered from the record.",
        relaxed=Variant(SEMANTIC, build(sid),
                        f"Patient {bad} does not exist; {sid} is the closest id, probably a typo. "
                        f"Using {sid}."),
        params={**draft.params, "subject_id": bad},
    )

