"""Tiny EHR databases (DuckDB and SQLite, same rows) shared by the sandbox tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

PATIENTS = [(1, "F", 70), (2, "M", 45), (3, "F", 33), (4, "M", 81), (5, "F", 59)]
ADMISSIONS = [(10, 1, "EMERGENCY"), (11, 1, "ELECTIVE"), (12, 3, "URGENT")]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture()
def db_dir(tmp_path: Path) -> Path:
    d = tmp_path / "db"
    d.mkdir()
    return d


@pytest.fixture()
def duck_db(db_dir: Path) -> Path:
    path = db_dir / "ehr.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE patients (subject_id INTEGER, gender VARCHAR, anchor_age INTEGER)")
    con.executemany("INSERT INTO patients VALUES (?, ?, ?)", PATIENTS)
    con.execute("CREATE TABLE admissions (hadm_id INTEGER, subject_id INTEGER, kind VARCHAR)")
    con.executemany("INSERT INTO admissions VALUES (?, ?, ?)", ADMISSIONS)
    con.close()
    return path


@pytest.fixture()
def lite_db(db_dir: Path) -> Path:
    path = db_dir / "ehr.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE patients (subject_id INTEGER, gender TEXT, anchor_age INTEGER)")
    con.executemany("INSERT INTO patients VALUES (?, ?, ?)", PATIENTS)
    con.execute("CREATE TABLE admissions (hadm_id INTEGER, subject_id INTEGER, kind TEXT)")
    con.executemany("INSERT INTO admissions VALUES (?, ?, ?)", ADMISSIONS)
    con.commit()
    con.close()
    return path

# The evidence tests that store evidence beside a pre-label use the annotation-store fixtures.
from tests.store_fixtures import (  # noqa: E402, F401 - pytest finds fixtures by name
    postgres_database,
    postgres_store_url,
    sqlite_template,
    store,
)
