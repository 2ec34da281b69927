"""A synthetic EHR in the shape of the MIMIC-IV hosp/icu tables an agent needs.

Everything here is invented: identifiers, code dictionaries and values are generated from a seed.
The column names and conventions follow MIMIC-IV (ICD codes stored without dots, both ICD-9 and
ICD-10 in one dictionary, shifted future years) because those conventions are exactly what
agents trip over.  Generation is vectorised where rows are numerous (labs, vitals) and the result
is bulk-loaded from DataFrames, so 2,000 patients build in a few seconds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

__all__ = [
    "CONCEPTS",
    "DDL",
    "DRUGS",
    "LAB_ITEMS",
    "VITAL_ITEMS",
    "Concept",
    "LabItem",
    "build_ehr",
    "table_content_hash",
]


@dataclass(frozen=True)
class Concept:
    """A clinical condition and its codes in both ICD versions (titles paraphrased)."""

    key: str
    name: str
    icd9: tuple[tuple[str, str], ...]
    icd10: tuple[tuple[str, str], ...]
    prevalence: float
    chronic: bool
    drg: str


CONCEPTS: tuple[Concept, ...] = (
    Concept("hypertension", "hypertension",
            (("4019", "Unspecified essential hypertension"),),
            (("I10", "Essential (primary) hypertension"),), 0.35, True, "hypertension"),
    Concept("diabetes", "type 2 diabetes",
            (("25000", "Diabetes mellitus without mention of complication, type II, not stated as "
                       "uncontrolled"),
             ("25002", "Diabetes mellitus without mention of complication, type II, uncontrolled"),
             ("25060", "Diabetes with neurological manifestations, type II")),
            (("E119", "Type 2 diabetes mellitus without complications"),
             ("E1165", "Type 2 diabetes mellitus with hyperglycemia"),
             ("E1122", "Type 2 diabetes mellitus with diabetic chronic kidney disease")),
            0.2, True, "diabetes"),
    Concept("hyperlipidemia", "hyperlipidemia",
            (("2724", "Other and unspecified hyperlipidemia"),
             ("2720", "Pure hypercholesterolemia")),
            (("E785", "Hyperlipidemia, unspecified"), ("E780", "Pure hypercholesterolemia")),
            0.28, True, "other"),
    Concept("aki", "acute kidney failure",
            (("5849", "Acute kidney failure, unspecified"),),
            (("N179", "Acute kidney failure, unspecified"),), 0.15, False, "renal"),
    Concept("chf", "congestive heart failure",
            (("4280", "Congestive heart failure, unspecified"),),
            (("I5023", "Acute on chronic systolic (congestive) heart failure"),
             ("I509", "Heart failure, unspecified")), 0.12, True, "heart_failure"),
    Concept("pneumonia", "pneumonia",
            (("486", "Pneumonia, organism unspecified"),),
            (("J189", "Pneumonia, unspecified organism"),), 0.1, False, "pneumonia"),
    Concept("afib", "atrial fibrillation",
            (("42731", "Atrial fibrillation"),),
            (("I4891", "Unspecified atrial fibrillation"),), 0.12, True, "arrhythmia"),
    Concept("copd", "chronic obstructive pulmonary disease",
            (("496", "Chronic airway obstruction, not elsewhere classified"),),
            (("J449", "Chronic obstructive pulmonary disease, unspecified"),), 0.08, True, "copd"),
    Concept("depression", "depression",
            (("311", "Depressive disorder, not elsewhere classified"),),
            (("F329", "Major depressive disorder, single episode, unspecified"),),
            0.12, True, "psych"),
    Concept("ileus", "ileus",
            (("5601", "Paralytic ileus"),),
            (("K567", "Ileus, unspecified"),), 0.04, False, "digestive"),
    Concept("sepsis", "sepsis",
            (("0389", "Unspecified septicemia"),),
            (("A419", "Sepsis, unspecified organism"),), 0.06, False, "sepsis"),
    Concept("uti", "urinary tract infection",
            (("5990", "Urinary tract infection, site not specified"),),
            (("N390", "Urinary tract infection, site not specified"),), 0.1, False, "uti"),
    Concept("hypokalemia", "hypokalemia",
            (("2768", "Hypopotassemia"),),
            (("E876", "Hypokalemia"),), 0.08, False, "other"),
    Concept("tobacco", "history of tobacco use",
            (("V1582", "Personal history of tobacco use"),),
            (("Z87891", "Personal history of nicotine dependence"),), 0.15, True, "other"),
    Concept("cad", "coronary artery disease",
            (("41401", "Coronary atherosclerosis of native coronary artery"),),
            (("I2510", "Atherosclerotic heart disease of native coronary artery without angina "
                       "pectoris"),), 0.15, True, "heart_failure"),
    Concept("anemia", "anemia",
            (("2859", "Anemia, unspecified"),),
            (("D649", "Anemia, unspecified"),), 0.12, False, "other"),
    Concept("gerd", "gastro-esophageal reflux",
            (("53081", "Esophageal reflux"),),
            (("K219", "Gastro-esophageal reflux disease without esophagitis"),), 0.12, True,
            "digestive"),
    Concept("hypothyroidism", "hypothyroidism",
            (("2449", "Unspecified acquired hypothyroidism"),),
            (("E039", "Hypothyroidism, unspecified"),), 0.08, True, "other"),
    Concept("resp_failure", "acute respiratory failure",
            (("51881", "Acute respiratory failure"),),
            (("J9601", "Acute respiratory failure with hypoxia"),), 0.05, False, "pneumonia"),
    Concept("ckd", "chronic kidney disease",
            (("5859", "Chronic kidney disease, unspecified"),),
            (("N189", "Chronic kidney disease, unspecified"),), 0.08, True, "renal"),
)

# Dictionary-only codes: they match the same keywords as real concepts (e.g. "hypertens",
# "diabetes") so a careless ILIKE lookup picks up codes nobody was coded with.
_DISTRACTOR_CODES: tuple[tuple[str, int, str], ...] = (
    ("40291", 9, "Unspecified hypertensive heart disease without heart failure"),
    ("I119", 10, "Hypertensive heart disease without heart failure"),
    ("25001", 9, "Diabetes mellitus without mention of complication, type I, not stated as "
                 "uncontrolled"),
    ("E109", 10, "Type 1 diabetes mellitus without complications"),
    ("V5867", 9, "Long-term (current) use of insulin"),
    ("Z794", 10, "Long-term (current) use of insulin"),
    ("5609", 9, "Unspecified intestinal obstruction"),
    ("K5660", 10, "Unspecified intestinal obstruction"),
    ("4589", 9, "Hypotension, unspecified"),
    ("I959", 10, "Hypotension, unspecified"),
)


@dataclass(frozen=True)
class LabItem:
    itemid: int
    label: str
    fluid: str
    category: str
    unit: str
    mean: float
    sd: float
    low: float
    high: float
    decimals: int
    panel: str  # "bmp" | "cbc" | "extra" | "urine"


# Item ids are invented; labels repeat across fluids on purpose (blood vs urine creatinine) so
# that grounding a lab name to an itemid is a real lookup step.
LAB_ITEMS: tuple[LabItem, ...] = (
    LabItem(52011, "Sodium", "Blood", "Chemistry", "mEq/L", 139, 4, 135, 145, 0, "bmp"),
    LabItem(52014, "Potassium", "Blood", "Chemistry", "mEq/L", 4.2, 0.6, 3.3, 5.1, 1, "bmp"),
    LabItem(52017, "Chloride", "Blood", "Chemistry", "mEq/L", 102, 5, 96, 108, 0, "bmp"),
    LabItem(52020, "Bicarbonate", "Blood", "Chemistry", "mEq/L", 25, 4, 22, 32, 0, "bmp"),
    LabItem(52023, "Urea Nitrogen", "Blood", "Chemistry", "mg/dL", 22, 12, 6, 20, 0, "bmp"),
    LabItem(52026, "Creatinine", "Blood", "Chemistry", "mg/dL", 1.2, 0.6, 0.5, 1.2, 1, "bmp"),
    LabItem(52029, "Glucose", "Blood", "Chemistry", "mg/dL", 125, 40, 70, 100, 0, "bmp"),
    LabItem(52101, "Hemoglobin", "Blood", "Hematology", "g/dL", 11.2, 2.0, 12, 16, 1, "cbc"),
    LabItem(52104, "Hematocrit", "Blood", "Hematology", "%", 34, 6, 36, 48, 1, "cbc"),
    LabItem(52107, "White Blood Cells", "Blood", "Hematology", "K/uL", 9.5, 4, 4, 11, 1, "cbc"),
    LabItem(52110, "Platelet Count", "Blood", "Hematology", "K/uL", 230, 80, 150, 440, 0, "cbc"),
    LabItem(52203, "Lactate", "Blood", "Blood Gas", "mmol/L", 1.8, 1.0, 0.5, 2.0, 1, "extra"),
    LabItem(52206, "pH", "Blood", "Blood Gas", "units", 7.38, 0.06, 7.35, 7.45, 2, "extra"),
    LabItem(52209, "Bilirubin, Total", "Blood", "Chemistry", "mg/dL", 1.0, 0.9, 0.0, 1.5, 1,
            "extra"),
    LabItem(52212, "Troponin T", "Blood", "Chemistry", "ng/mL", 0.05, 0.08, 0.0, 0.01, 2,
            "extra"),
    LabItem(52215, "INR(PT)", "Blood", "Hematology", "", 1.3, 0.4, 0.9, 1.1, 1, "extra"),
    LabItem(52218, "Vancomycin", "Blood", "Chemistry", "ug/mL", 15, 6, 10, 20, 1, "extra"),
    LabItem(52221, "Magnesium", "Blood", "Chemistry", "mg/dL", 2.0, 0.3, 1.6, 2.6, 1, "extra"),
    LabItem(52224, "Potassium, Whole Blood", "Blood", "Blood Gas", "mEq/L", 4.1, 0.6, 3.5, 5.3,
            1, "extra"),
    LabItem(52301, "Creatinine", "Urine", "Chemistry", "mg/dL", 90, 45, 20, 320, 0, "urine"),
    LabItem(52304, "Sodium", "Urine", "Chemistry", "mEq/L", 60, 30, 20, 200, 0, "urine"),
    LabItem(52307, "Glucose", "Urine", "Chemistry", "mg/dL", 20, 40, 0, 15, 0, "urine"),
    LabItem(52310, "Potassium", "Urine", "Chemistry", "mEq/L", 40, 20, 25, 125, 0, "urine"),
)

# (itemid, label, category, unit, mean, sd, decimals, probability a stay has it)
VITAL_ITEMS: tuple[tuple[int, str, str, str, float, float, int, float], ...] = (
    (226101, "Heart Rate", "Routine Vital Signs", "bpm", 86, 16, 0, 1.0),
    (226104, "Non Invasive Blood Pressure systolic", "Routine Vital Signs", "mmHg", 121, 19, 0,
     1.0),
    (226107, "Non Invasive Blood Pressure diastolic", "Routine Vital Signs", "mmHg", 64, 12, 0,
     1.0),
    (226110, "Arterial Blood Pressure systolic", "Routine Vital Signs", "mmHg", 118, 21, 0, 0.35),
    (226113, "Respiratory Rate", "Respiratory", "insp/min", 19, 5, 0, 1.0),
    (226116, "O2 saturation pulseoxymetry", "Respiratory", "%", 96.5, 2.5, 0, 1.0),
    (226119, "Temperature Fahrenheit", "Routine Vital Signs", "°F", 98.6, 1.0, 1, 0.9),
)

# (drug, dose_val_rx, dose_unit_rx, route, base weight, concept keys that raise the weight)
DRUGS: tuple[tuple[str, str, str, str, float, tuple[str, ...]], ...] = (
    ("Acetaminophen", "650", "mg", "PO", 3.0, ()),
    ("Heparin", "5000", "UNIT", "SC", 2.5, ()),
    ("Sodium Chloride 0.9%  Flush", "3", "mL", "IV", 2.5, ()),
    ("Docusate Sodium", "100", "mg", "PO", 1.8, ()),
    ("Senna", "8.6", "mg", "PO", 1.5, ()),
    ("Ondansetron", "4", "mg", "IV", 1.4, ()),
    ("Pantoprazole", "40", "mg", "PO", 1.2, ("gerd",)),
    ("Metoprolol Tartrate", "25", "mg", "PO", 0.8, ("hypertension", "afib", "cad")),
    ("Lisinopril", "10", "mg", "PO", 0.5, ("hypertension", "chf")),
    ("Atorvastatin", "40", "mg", "PO", 0.6, ("hyperlipidemia", "cad")),
    ("Aspirin", "81", "mg", "PO", 0.8, ("cad",)),
    ("Insulin", "2", "UNIT", "SC", 0.4, ("diabetes",)),
    ("Metformin (Glucophage)", "500", "mg", "PO", 0.2, ("diabetes",)),
    ("Furosemide", "40", "mg", "IV", 0.5, ("chf", "ckd")),
    ("Potassium Chloride", "20", "mEq", "PO", 0.8, ("hypokalemia",)),
    ("Magnesium Sulfate", "2", "gm", "IV", 0.9, ()),
    ("Vancomycin", "1000", "mg", "IV", 0.5, ("sepsis", "pneumonia")),
    ("CefTRIAXone", "1", "g", "IV", 0.5, ("pneumonia", "uti")),
    ("Morphine Sulfate", "2", "mg", "IV", 0.7, ()),
    ("OxyCODONE (Immediate Release)", "5", "mg", "PO", 0.8, ()),
    ("Enoxaparin Sodium", "40", "mg", "SC", 0.6, ()),
    ("Levothyroxine Sodium", "50", "mcg", "PO", 0.2, ("hypothyroidism",)),
    ("Sertraline", "50", "mg", "PO", 0.2, ("depression",)),
    ("Albuterol 0.083% Neb Soln", "1", "NEB", "IH", 0.3, ("copd",)),
    ("Warfarin", "5", "mg", "PO", 0.2, ("afib",)),
)

_WARDS = ("Medicine", "Med/Surg", "Medicine/Cardiology", "Hematology/Oncology", "Neurology",
          "Surgery", "Cardiac Surgery", "Transplant", "Observation")
_ICUS = ("Medical Intensive Care Unit (MICU)", "Surgical Intensive Care Unit (SICU)",
         "Coronary Care Unit (CCU)", "Medical/Surgical Intensive Care Unit (MICU/SICU)",
         "Trauma SICU (TSICU)", "Cardiac Vascular Intensive Care Unit (CVICU)",
         "Neuro Intensive Care Unit (Neuro ICU)")
_ADM_TYPES = ("EW EMER.", "URGENT", "ELECTIVE", "OBSERVATION ADMIT", "DIRECT EMER.",
              "SURGICAL SAME DAY ADMISSION", "EU OBSERVATION")
_ADM_TYPE_P = (0.42, 0.14, 0.1, 0.12, 0.08, 0.07, 0.07)
_ADM_LOCS = ("EMERGENCY ROOM", "PHYSICIAN REFERRAL", "TRANSFER FROM HOSPITAL",
             "WALK-IN/SELF REFERRAL", "CLINIC REFERRAL", "PACU",
             "TRANSFER FROM SKILLED NURSING FACILITY", "PROCEDURE SITE")
_ADM_LOC_P = (0.45, 0.18, 0.1, 0.08, 0.08, 0.05, 0.03, 0.03)
_DISCH_LOCS = ("HOME", "HOME HEALTH CARE", "SKILLED NURSING FACILITY", "REHAB",
               "CHRONIC/LONG TERM ACUTE CARE", "AGAINST ADVICE", "HOSPICE")
_DISCH_LOC_P = (0.45, 0.25, 0.14, 0.07, 0.04, 0.02, 0.03)
_INSURANCE = ("Medicare", "Medicaid", "Private", "Other")
_LANGUAGES = ("ENGLISH", "SPANISH", "CHINESE", "RUSSIAN", "PORTUGUESE", "HAITIAN")
_LANG_P = (0.86, 0.06, 0.03, 0.02, 0.02, 0.01)
_MARITAL = ("MARRIED", "SINGLE", "WIDOWED", "DIVORCED")
_RACES = ("WHITE", "BLACK/AFRICAN AMERICAN", "HISPANIC/LATINO - PUERTO RICAN", "ASIAN - CHINESE",
          "ASIAN", "HISPANIC OR LATINO", "OTHER", "UNKNOWN")
_RACE_P = (0.6, 0.14, 0.04, 0.03, 0.03, 0.04, 0.06, 0.06)
_MICRO = (("BLOOD CULTURE", "Blood Culture, Routine"), ("URINE", "URINE CULTURE"),
          ("SPUTUM", "RESPIRATORY CULTURE"), ("MRSA SCREEN", "MRSA SCREEN"))
_ORGANISMS = ("ESCHERICHIA COLI", "STAPH AUREUS COAG +", "KLEBSIELLA PNEUMONIAE",
              "ENTEROCOCCUS SP.", "PSEUDOMONAS AERUGINOSA", "STAPHYLOCOCCUS, COAGULASE NEGATIVE")
# DRG group -> (HCFA code, HCFA description, APR code, APR description)
_DRG: dict[str, tuple[str, str, str, str]] = {
    "hypertension": ("305", "HYPERTENSION W/O MCC", "199", "HYPERTENSION"),
    "diabetes": ("638", "DIABETES W CC", "420", "DIABETES"),
    "renal": ("683", "RENAL FAILURE W CC", "460", "RENAL FAILURE"),
    "heart_failure": ("292", "HEART FAILURE & SHOCK W CC", "194", "HEART FAILURE"),
    "pneumonia": ("194", "SIMPLE PNEUMONIA & PLEURISY W CC", "139", "OTHER PNEUMONIA"),
    "arrhythmia": ("309", "CARDIAC ARRHYTHMIA & CONDUCTION DISORDERS W CC", "201",
                   "CARDIAC ARRHYTHMIA & CONDUCTION DISORDERS"),
    "copd": ("191", "CHRONIC OBSTRUCTIVE PULMONARY DISEASE W CC", "140",
             "CHRONIC OBSTRUCTIVE PULMONARY DISEASE"),
    "psych": ("885", "PSYCHOSES", "753", "BIPOLAR DISORDERS"),
    "digestive": ("394", "OTHER DIGESTIVE SYSTEM DIAGNOSES W CC", "254",
                  "OTHER DIGESTIVE SYSTEM DIAGNOSES"),
    "sepsis": ("871", "SEPTICEMIA OR SEVERE SEPSIS W/O MV >96 HOURS W MCC", "720",
               "SEPTICEMIA & DISSEMINATED INFECTIONS"),
    "uti": ("690", "KIDNEY & URINARY TRACT INFECTIONS W/O MCC", "463",
            "KIDNEY & URINARY TRACT INFECTIONS"),
    "other": ("948", "SIGNS & SYMPTOMS W/O MCC", "862", "OTHER AFTERCARE & CONVALESCENCE"),
}

# Explicit DDL so that column types do not depend on pandas' inference.
DDL: dict[str, str] = {
    "patients": "subject_id INTEGER, gender VARCHAR, anchor_age INTEGER, anchor_year INTEGER, "
                "dod DATE",
    "admissions": "subject_id INTEGER, hadm_id INTEGER, admittime TIMESTAMP, "
                  "dischtime TIMESTAMP, deathtime TIMESTAMP, admission_type VARCHAR, "
                  "admission_location VARCHAR, discharge_location VARCHAR, insurance VARCHAR, "
                  "language VARCHAR, marital_status VARCHAR, race VARCHAR",
    "transfers": "subject_id INTEGER, hadm_id INTEGER, transfer_id INTEGER, eventtype VARCHAR, "
                 "careunit VARCHAR, intime TIMESTAMP, outtime TIMESTAMP",
    "icustays": "subject_id INTEGER, hadm_id INTEGER, stay_id INTEGER, first_careunit VARCHAR, "
                "last_careunit VARCHAR, intime TIMESTAMP, outtime TIMESTAMP, los DOUBLE",
    "diagnoses_icd": "subject_id INTEGER, hadm_id INTEGER, seq_num INTEGER, icd_code VARCHAR, "
                     "icd_version INTEGER",
    "d_icd_diagnoses": "icd_code VARCHAR, icd_version INTEGER, long_title VARCHAR",
    "labevents": "labevent_id INTEGER, subject_id INTEGER, hadm_id INTEGER, itemid INTEGER, "
                 "charttime TIMESTAMP, value VARCHAR, valuenum DOUBLE, valueuom VARCHAR, "
                 "flag VARCHAR",
    "d_labitems": "itemid INTEGER, label VARCHAR, fluid VARCHAR, category VARCHAR",
    "prescriptions": "subject_id INTEGER, hadm_id INTEGER, starttime TIMESTAMP, "
                     "stoptime TIMESTAMP, drug VARCHAR, dose_val_rx VARCHAR, "
                     "dose_unit_rx VARCHAR, route VARCHAR",
    "microbiologyevents": "microevent_id INTEGER, subject_id INTEGER, hadm_id INTEGER, "
                          "chartdate DATE, spec_type_desc VARCHAR, test_name VARCHAR, "
                          "org_name VARCHAR",
    "chartevents": "subject_id INTEGER, hadm_id INTEGER, stay_id INTEGER, itemid INTEGER, "
                   "charttime TIMESTAMP, valuenum DOUBLE, valueuom VARCHAR",
    "d_items": "itemid INTEGER, label VARCHAR, category VARCHAR",
    "drgcodes": "subject_id INTEGER, hadm_id INTEGER, drg_type VARCHAR, drg_code VARCHAR, "
                "description VARCHAR, drg_severity INTEGER",
}

_SECOND = np.timedelta64(1, "s")
_HOUR = 3600
_DAY = 86400


def _ts(seconds: np.ndarray) -> np.ndarray:
    """Seconds since the epoch (int64, may contain -1 for missing) -> datetime64[us] with NaT."""
    out = seconds.astype("int64").astype("datetime64[s]").astype("datetime64[us]")
    out[seconds < 0] = np.datetime64("NaT")
    return out


def _choice(rng: np.random.Generator, options: tuple[str, ...], size: int,
            p: tuple[float, ...] | None = None) -> np.ndarray:
    probs = None if p is None else np.asarray(p) / np.sum(p)
    return np.asarray(options, dtype=object)[rng.choice(len(options), size=size, p=probs)]


def _generate(rng: np.random.Generator, n_patients: int) -> dict[str, pd.DataFrame]:
    n = n_patients
    # -- patients -----------------------------------------------------------------------
    subject_id = 10_000_000 + np.cumsum(rng.integers(7, 700, size=n))
    gender = _choice(rng, ("F", "M"), n)
    anchor_age = rng.integers(18, 92, size=n)
    anchor_year = rng.integers(2110, 2186, size=n)
    race = _choice(rng, _RACES, n, _RACE_P)
    language = _choice(rng, _LANGUAGES, n, _LANG_P)
    marital = _choice(rng, (*_MARITAL, ""), n, (0.45, 0.3, 0.1, 0.1, 0.05))
    base_ins = np.where(anchor_age >= 65,
                        _choice(rng, _INSURANCE, n, (0.8, 0.05, 0.1, 0.05)),
                        _choice(rng, _INSURANCE, n, (0.1, 0.25, 0.45, 0.2)))
    n_adm = np.clip(1 + rng.poisson(1.3, size=n), 1, 8)
    # Per-patient chronic conditions recur in every admission; acute ones are drawn anew.
    chronic = [c for c in CONCEPTS if c.chronic]
    acute = [c for c in CONCEPTS if not c.chronic]
    has_chronic = rng.random((n, len(chronic))) < np.array([c.prevalence for c in chronic])

    # -- admissions ----------------------------------------------------------------------
    m = int(n_adm.sum())
    pat_idx = np.repeat(np.arange(n), n_adm)
    first = np.r_[True, pat_idx[1:] != pat_idx[:-1]]
    year_start = (anchor_year[pat_idx] - 1970) * 365.25 * _DAY
    gap = np.where(first, rng.uniform(0, 3 * 365, m), 2 + rng.exponential(320, m)) * _DAY
    # cumulative gap within each patient: subtract the cumsum at the patient's first row
    csum = np.cumsum(gap)
    start_of_group = np.maximum.accumulate(np.where(first, np.arange(m), 0))
    offset = csum - csum[start_of_group] + gap[start_of_group]
    los_days = np.clip(rng.lognormal(1.3, 0.7, m), 0.3, 60)
    # Next admission must start after this one ends: push offsets by the previous stays.
    los_prev = np.r_[0.0, los_days[:-1]] * _DAY
    los_prev[first] = 0
    lcs = np.cumsum(los_prev)
    offset = offset + lcs - lcs[start_of_group]
    admit = (year_start + offset + rng.integers(0, _DAY, m)).astype("int64")
    admit = admit - admit % 60
    disch = (admit + los_days * _DAY).astype("int64")
    disch = disch - disch % 60
    hadm_id = 20_000_000 + rng.choice(9_999_999, size=m, replace=False)
    last = np.r_[pat_idx[1:] != pat_idx[:-1], True]
    died = last & (rng.random(m) < 0.07)
    deathtime = np.where(died, disch, -1)
    adm_loc = _choice(rng, _ADM_LOCS, m, _ADM_LOC_P)
    disch_loc = np.where(died, "DIED", _choice(rng, _DISCH_LOCS, m, _DISCH_LOC_P))
    insurance = np.where(rng.random(m) < 0.88, base_ins[pat_idx], _choice(rng, _INSURANCE, m))
    marital_adm = marital[pat_idx].astype(object)
    marital_adm[marital_adm == ""] = None
    admissions = pd.DataFrame({
        "subject_id": subject_id[pat_idx],
        "hadm_id": hadm_id,
        "admittime": _ts(admit),
        "dischtime": _ts(disch),
        "deathtime": _ts(deathtime),
        "admission_type": _choice(rng, _ADM_TYPES, m, _ADM_TYPE_P),
        "admission_location": adm_loc,
        "discharge_location": disch_loc,
        "insurance": insurance,
        "language": language[pat_idx],
        "marital_status": marital_adm,
        "race": race[pat_idx],
    })

    dod = np.full(n, -1, dtype="int64")
    dod[pat_idx[died]] = disch[died]
    later = (dod < 0) & (rng.random(n) < 0.08)
    last_disch = disch[last]
    dod[later] = last_disch[later] + (rng.integers(5, 700, later.sum()) * _DAY)
    dod_dates = _ts(dod).astype("datetime64[D]")
    patients = pd.DataFrame({
        "subject_id": subject_id, "gender": gender, "anchor_age": anchor_age,
        "anchor_year": anchor_year, "dod": dod_dates,
    })

    # -- per-admission rows: transfers, icu stays, diagnoses, prescriptions, drg, micro -----
    icd10_from = rng.integers(0, n_adm + 1)  # admissions with index >= this use ICD-10
    adm_rank = np.arange(m) - start_of_group
    icd_version = np.where(adm_rank >= icd10_from[pat_idx], 10, 9)
    icu_flag = rng.random(m) < 0.32
    acute_p = np.array([c.prevalence for c in acute])
    has_acute = rng.random((m, len(acute))) < acute_p * np.where(icu_flag, 1.8, 1.0)[:, None]

    tr_rows: list[tuple[int, int, int, str, str | None, int, int]] = []
    icu_rows: list[tuple[int, int, int, str, str, int, int, float]] = []
    dx_rows: list[tuple[int, int, int, str, int]] = []
    rx_rows: list[tuple[int, int, int, int, str, str, str, str]] = []
    drg_rows: list[tuple[int, int, str, str, str, int | None]] = []
    micro_rows: list[tuple[int, int, int, int, str, str, str | None]] = []
    transfer_id = 30_000_000
    stay_id = 30_000_000
    microevent_id = 1
    drug_w = np.array([d[4] for d in DRUGS])
    u = rng.random((m, 16))  # a block of uniforms per admission keeps the loop cheap
    n_dx_extra = rng.integers(0, 4, m)
    n_rx = rng.integers(3, 16, m)
    drug_draws = rng.random((m, 15))
    micro_n = np.where(rng.random(m) < 0.3, rng.integers(1, 4, m), 0)
    severity = rng.integers(1, 5, m)
    concept_keys: list[list[str]] = []
    for a in range(m):
        sid = int(subject_id[pat_idx[a]])
        hid = int(hadm_id[a])
        t0, t1 = int(admit[a]), int(disch[a])
        # transfers: optional ED visit, a ward, maybe an ICU episode and a step-down ward
        events: list[tuple[str, str | None, int, int]] = []
        if adm_loc[a] == "EMERGENCY ROOM":
            events.append(("ED", "Emergency Department", t0 - int(2 + 6 * u[a, 0]) * _HOUR, t0))
        ward = _WARDS[int(u[a, 1] * len(_WARDS))]
        if icu_flag[a]:
            icu = _ICUS[int(u[a, 2] * len(_ICUS))]
            t_icu = t0 + int((t1 - t0) * 0.1 * u[a, 3])
            t_icu_out = t_icu + int((t1 - t_icu) * (0.35 + 0.4 * u[a, 4]))
            icu2 = icu if u[a, 5] < 0.85 else _ICUS[int(u[a, 6] * len(_ICUS))]
            t_mid = t_icu + (t_icu_out - t_icu) // 2
            t_icu, t_icu_out, t_mid = (x - x % 60 for x in (t_icu, t_icu_out, t_mid))
            if t_icu > t0:  # ward first, then the ICU
                events.append(("admit", ward, t0, t_icu))
                events.append(("transfer", icu, t_icu, t_mid))
            else:  # admitted straight to the ICU
                events.append(("admit", icu, t0, t_mid))
            events.append(("transfer", icu2, t_mid, t_icu_out))
            events.append(("transfer", _WARDS[int(u[a, 7] * len(_WARDS))], t_icu_out, t1))
            icu_in = t_icu if t_icu > t0 else t0
            icu_rows.append((sid, hid, stay_id, icu, icu2, icu_in, t_icu_out,
                             round((t_icu_out - icu_in) / _DAY, 4)))
            stay_id += 1 + int(u[a, 8] * 40)
        else:
            half = t0 + (t1 - t0) // 2
            half -= half % 60
            events.append(("admit", ward, t0, half if u[a, 9] < 0.3 else t1))
            if u[a, 9] < 0.3:
                events.append(("transfer", _WARDS[int(u[a, 10] * len(_WARDS))], half, t1))
        events.append(("discharge", None, t1, -1))
        for ev, unit, tin, tout in events:
            tr_rows.append((sid, hid, transfer_id, ev, unit, tin, tout))
            transfer_id += 1 + int(u[a, 11] * 7)
        # diagnoses: chronic conditions + sampled acute ones, coded in this admission's version
        p = pat_idx[a]
        keys = [c.key for c, h in zip(chronic, has_chronic[p], strict=True) if h]
        keys += [c.key for c, h in zip(acute, has_acute[a], strict=True) if h]
        concept_keys.append(keys)
        version = int(icd_version[a])
        codes: list[str] = []
        for j, key in enumerate(keys):
            c = _CONCEPT_BY_KEY[key]
            pool = c.icd9 if version == 9 else c.icd10
            codes.append(pool[(a + j) % len(pool)][0])
        # filler codes keep the diagnosis lists realistically long
        for k in range(int(n_dx_extra[a])):
            c = CONCEPTS[(a * 7 + k * 5) % len(CONCEPTS)]
            pool = c.icd9 if version == 9 else c.icd10
            code = pool[0][0]
            if code not in codes:
                codes.append(code)
                keys.append(c.key)
        if not codes:
            c = acute[int(u[a, 12] * len(acute))]
            codes.append((c.icd9 if version == 9 else c.icd10)[0][0])
            keys.append(c.key)
        order = np.argsort(u[a, : len(codes)] if len(codes) <= 16 else np.arange(len(codes)))
        for seq, i in enumerate(order, start=1):
            dx_rows.append((sid, hid, seq, codes[i], version))
        primary = keys[int(order[0])]
        # prescriptions: drug weights boosted by this admission's conditions
        w = drug_w.copy()
        for di, d in enumerate(DRUGS):
            if any(k in keys for k in d[5]):
                w[di] += 2.5
        cdf = np.cumsum(w / w.sum())
        for r in range(int(n_rx[a])):
            di = int(np.searchsorted(cdf, drug_draws[a, r], side="right"))
            di = min(di, len(DRUGS) - 1)
            d = DRUGS[di]
            st = t0 + int((t1 - t0) * ((r * 0.37 + drug_draws[a, r]) % 1) * 0.8)
            st -= st % 60
            sp = min(t1, st + int(_DAY * (1 + 3 * drug_draws[a, (r + 1) % 15])))
            rx_rows.append((sid, hid, st, sp, d[0], d[1], d[2], d[3]))
        # DRG codes: one HCFA and one APR row per admission
        hcfa_code, hcfa_desc, apr_code, apr_desc = _DRG[_CONCEPT_BY_KEY[primary].drg]
        drg_rows.append((sid, hid, "HCFA", hcfa_code, hcfa_desc, None))
        drg_rows.append((sid, hid, "APR", apr_code, apr_desc, int(severity[a])))
        for k in range(int(micro_n[a])):
            spec, test = _MICRO[int(u[a, 13 + k] * len(_MICRO))]
            org = None if u[a, 13 + k] * 10 % 1 < 0.55 else \
                _ORGANISMS[int((u[a, 13 + k] * 100) % len(_ORGANISMS))]
            day = t0 + int((t1 - t0) * ((k + 1) / 4))
            micro_rows.append((microevent_id, sid, hid, day, spec, test, org))
            microevent_id += 1

    tr = pd.DataFrame(tr_rows, columns=["subject_id", "hadm_id", "transfer_id", "eventtype",
                                        "careunit", "intime", "outtime"])
    tr["intime"] = _ts(tr["intime"].to_numpy())
    tr["outtime"] = _ts(tr["outtime"].to_numpy())
    icu_df = pd.DataFrame(icu_rows, columns=["subject_id", "hadm_id", "stay_id", "first_careunit",
                                             "last_careunit", "intime", "outtime", "los"])
    icu_in_s = icu_df["intime"].to_numpy().astype("int64")
    icu_out_s = icu_df["outtime"].to_numpy().astype("int64")
    icu_df["intime"] = _ts(icu_in_s)
    icu_df["outtime"] = _ts(icu_out_s)
    dx = pd.DataFrame(dx_rows, columns=["subject_id", "hadm_id", "seq_num", "icd_code",
                                        "icd_version"])
    rx = pd.DataFrame(rx_rows, columns=["subject_id", "hadm_id", "starttime", "stoptime", "drug",
                                        "dose_val_rx", "dose_unit_rx", "route"])
    rx["starttime"] = _ts(rx["starttime"].to_numpy())
    rx["stoptime"] = _ts(rx["stoptime"].to_numpy())
    drg = pd.DataFrame(drg_rows, columns=["subject_id", "hadm_id", "drg_type", "drg_code",
                                          "description", "drg_severity"])
    drg["drg_severity"] = drg["drg_severity"].astype("Int64")
    micro = pd.DataFrame(micro_rows, columns=["microevent_id", "subject_id", "hadm_id",
                                              "chartdate", "spec_type_desc", "test_name",
                                              "org_name"])
    micro["chartdate"] = _ts(micro["chartdate"].to_numpy()).astype("datetime64[D]")

    d_icd = pd.DataFrame(
        [(code, 9, title) for c in CONCEPTS for code, title in c.icd9]
        + [(code, 10, title) for c in CONCEPTS for code, title in c.icd10]
        + [(code, v, title) for code, v, title in _DISTRACTOR_CODES],
        columns=["icd_code", "icd_version", "long_title"],
    ).sort_values(["icd_version", "icd_code"], kind="stable").reset_index(drop=True)

    labs = _labs(rng, subject_id[pat_idx], hadm_id, admit, disch, concept_keys)
    chart = _vitals(rng, icu_df, icu_in_s, icu_out_s)
    d_lab = pd.DataFrame([(li.itemid, li.label, li.fluid, li.category) for li in LAB_ITEMS],
                         columns=["itemid", "label", "fluid", "category"])
    d_items = pd.DataFrame([(v[0], v[1], v[2]) for v in VITAL_ITEMS],
                           columns=["itemid", "label", "category"])
    return {
        "patients": patients, "admissions": admissions, "transfers": tr, "icustays": icu_df,
        "diagnoses_icd": dx, "d_icd_diagnoses": d_icd, "labevents": labs, "d_labitems": d_lab,
        "prescriptions": rx, "microbiologyevents": micro, "chartevents": chart,
        "d_items": d_items, "drgcodes": drg,
    }


_CONCEPT_BY_KEY = {c.key: c for c in CONCEPTS}


def _labs(rng: np.random.Generator, sid: np.ndarray, hid: np.ndarray, admit: np.ndarray,
          disch: np.ndarray, concept_keys: list[list[str]]) -> pd.DataFrame:
    """Lab draws per admission: daily basic panels, CBCs, and occasional extra/urine tests."""
    m = len(hid)
    days = np.maximum(1, ((disch - admit) // _DAY)).astype("int64")
    item_idx: list[np.ndarray] = []
    adm_idx: list[np.ndarray] = []
    for i, li in enumerate(LAB_ITEMS):
        if li.panel in ("bmp", "cbc"):
            present = rng.random(m) < (0.97 if li.panel == "bmp" else 0.9)
            count = np.where(present, np.minimum(days, 6) - rng.integers(0, 2, m), 0)
        else:
            p = 0.18 if li.panel == "extra" else 0.12
            count = np.where(rng.random(m) < p, rng.integers(1, 4, m), 0)
        count = np.maximum(count, 0)
        adm_idx.append(np.repeat(np.arange(m), count))
        item_idx.append(np.full(int(count.sum()), i))
    a = np.concatenate(adm_idx)
    it = np.concatenate(item_idx)
    k = len(a)
    span = (disch[a] - admit[a]).astype("float64")
    t = admit[a] + (rng.random(k) * span * 0.95).astype("int64")
    t = t - t % 60
    means = np.array([li.mean for li in LAB_ITEMS])
    sds = np.array([li.sd for li in LAB_ITEMS])
    # conditions shift the relevant labs so cohort questions have signal
    shift = np.zeros(k)
    kidney = np.array([("aki" in ks or "ckd" in ks) for ks in concept_keys])
    low_k = np.array(["hypokalemia" in ks for ks in concept_keys])
    labels = np.array([li.label for li in LAB_ITEMS], dtype=object)
    fluids = np.array([li.fluid for li in LAB_ITEMS], dtype=object)
    blood_creat = (labels[it] == "Creatinine") & (fluids[it] == "Blood")
    shift[blood_creat & kidney[a]] += 1.4
    shift[(labels[it] == "Potassium") & low_k[a]] -= 1.0
    val = means[it] + shift + sds[it] * rng.standard_normal(k)
    val = np.maximum(val, 0.0)
    decimals = np.array([li.decimals for li in LAB_ITEMS])[it]
    val = np.round(val * 10.0 ** decimals) / 10.0 ** decimals
    lows = np.array([li.low for li in LAB_ITEMS])[it]
    highs = np.array([li.high for li in LAB_ITEMS])[it]
    flag = np.full(k, None, dtype=object)
    flag[(val < lows) | (val > highs)] = "abnormal"
    value_txt = [f"{v:.{d}f}" for v, d in zip(val.tolist(), decimals.tolist(), strict=True)]
    order = np.lexsort((it, t, a))
    df = pd.DataFrame({
        "labevent_id": np.arange(1, k + 1),
        "subject_id": sid[a][order],
        "hadm_id": hid[a][order],
        "itemid": np.array([li.itemid for li in LAB_ITEMS])[it][order],
        "charttime": _ts(t[order]),
        "value": np.asarray(value_txt, dtype=object)[order],
        "valuenum": val[order],
        "valueuom": np.array([li.unit for li in LAB_ITEMS], dtype=object)[it][order],
        "flag": flag[order],
    })
    return df


def _vitals(rng: np.random.Generator, icu: pd.DataFrame, t_in: np.ndarray,
            t_out: np.ndarray) -> pd.DataFrame:
    """Charted vitals for each ICU stay, roughly every two to four hours."""
    s = len(icu)
    hours = np.maximum(1, (t_out - t_in) // _HOUR)
    n_meas = np.clip(hours // 3, 2, 30)
    parts: list[pd.DataFrame] = []
    for itemid, _label, _cat, unit, mean, sd, dec, p in VITAL_ITEMS:
        present = rng.random(s) < p
        cnt = np.where(present, n_meas, 0)
        idx = np.repeat(np.arange(s), cnt)
        k = len(idx)
        t = t_in[idx] + (rng.random(k) * (t_out[idx] - t_in[idx])).astype("int64")
        t = t - t % 60
        stay_bias = rng.standard_normal(s) * sd * 0.6
        v = mean + stay_bias[idx] + sd * 0.6 * rng.standard_normal(k)
        v = np.round(v * 10.0 ** dec) / 10.0 ** dec
        parts.append(pd.DataFrame({
            "subject_id": icu["subject_id"].to_numpy()[idx],
            "hadm_id": icu["hadm_id"].to_numpy()[idx],
            "stay_id": icu["stay_id"].to_numpy()[idx],
            "itemid": np.full(k, itemid),
            "charttime": t,
            "valuenum": v,
            "valueuom": np.full(k, unit, dtype=object),
        }))
    df = pd.concat(parts, ignore_index=True)
    df = df.sort_values(["stay_id", "charttime", "itemid"], kind="stable").reset_index(drop=True)
    df["charttime"] = _ts(df["charttime"].to_numpy())
    return df


def build_ehr(path: Path, *, seed: int, n_patients: int = 2000) -> None:
    """Write a synthetic MIMIC-IV-shaped DuckDB database to ``path`` (replacing it).

    The same ``seed`` and ``n_patients`` always yield the same table contents."""
    rng = np.random.default_rng(seed)
    tables = _generate(rng, n_patients)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, path.with_name(path.name + ".wal")):
        if p.exists():
            p.unlink()
    con = duckdb.connect(str(path))
    try:
        for name, df in tables.items():
            con.execute(f"CREATE TABLE {name} ({DDL[name]})")
            con.register("_frame", df)
            cols = ", ".join(c.split()[0] for c in DDL[name].split(", "))
            con.execute(f"INSERT INTO {name} SELECT {cols} FROM _frame")
            con.unregister("_frame")
        con.execute("CHECKPOINT")
    finally:
        con.close()


def table_content_hash(path: Path) -> str:
    """Hash of every table's rows in a canonical order: equal for equal contents even when the
    database files differ byte-wise (DuckDB's block layout is not part of the contract)."""
    h = hashlib.sha256()
    con = duckdb.connect(str(path), read_only=True)
    try:
        for name in sorted(DDL):
            h.update(name.encode())
            rows = con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
            for row in rows:
                h.update(repr(row).encode())
    finally:
        con.close()
    return h.hexdigest()
