"""One proposal per failure: literals compared as the database compares them, the step where the
agent commits to the diverging part, failures without a reference SQL and without any tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from labeling.evidence import find_divergence
from labeling.signals import CODE_LOOKUP
from tests.labeling.support import sqlite_ehr
from tests.labeling.test_evidence import sql, traj

GENDER_REF = "SELECT COUNT(*) FROM patients WHERE gender = 'f' AND anchor_age > 60"


@pytest.fixture()
def patients(tmp_path: Path) -> Path:
    return sqlite_ehr(tmp_path / "ehr.sqlite", (
        "CREATE TABLE patients (subject_id INTEGER, gender TEXT, anchor_age INTEGER);"
        "INSERT INTO patients VALUES (1, 'f', 70), (2, 'f', 65), (3, 'm', 80);"
    ))


def test_a_literal_in_another_case_is_a_divergence(patients: Path) -> None:
    upper = GENDER_REF.replace("'f'", "'F'")
    steps = [sql("SELECT * FROM patients LIMIT 3", "[(1, 'f', 70)]"), sql(upper, "[(0,)]")]
    for db in (None, patients):  # structurally, and executed (0 rows against 2)
        ev = find_divergence(traj(steps, 0, ref=GENDER_REF, gold=[[2]]), db)
        assert ev.part == "codes" and ev.category == CODE_LOOKUP, ev.reason
        assert "gender 'F' where the reference has 'f'" in ev.reason
        assert ev.step == 1  # the query that wrote the value
    # The same literal in the same case is no divergence; a LIKE pattern folds case.
    same = find_divergence(traj([sql(GENDER_REF, "[(2,)]")], 3, ref=GENDER_REF, gold=[[2]]))
    assert "where the reference has" not in same.reason
    like_ref = "SELECT COUNT(*) FROM d_labitems WHERE label LIKE '%Hemoglobin%'"
    like = find_divergence(traj([sql(like_ref.replace("Hemoglobin", "hemoglobin"))], 3,
                                ref=like_ref, gold=[[2]]))
    assert "where the reference has" not in like.reason
