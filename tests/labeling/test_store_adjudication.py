"""Disagreements, adjudication rules, final-label provenance and the append-only history."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from labeling.store import ConflictError, PermissionDeniedError, Store, StoreError
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord


def _prelabel(store: Store, tid: str, category: str, confidence: float) -> None:
    store.prelabels.save(
        PrelabelRecord(
            key=PrelabelKey(tid, "v1", "p1", "gemini-x"),
            result=LabelResult(category, confidence, 4, "step 4: ...", "gemini", "1", "other"),
        )
    )


def _label(store: Store, tid: str, who: str, category: str, step: int | None = None) -> None:
    store.labels.add(tid, category, annotator=who, taxonomy_version="v1", first_error_step=step)


def test_annotator_cannot_adjudicate(team: Store) -> None:
    with pytest.raises(PermissionDeniedError, match="only leads and admins"):
        team.adjudications.decide("t1", "bad_join", "because", "ana", expected_version=None,
                      taxonomy_version="v")
    assert isinstance(PermissionDeniedError("x"), StoreError)
    assert team.adjudications.get("t1") is None
    assert team.history.entries("adjudication") == []
    # Admins may; a reason is mandatory.
    with pytest.raises(StoreError, match="reason"):
        team.adjudications.decide("t1", "bad_join", "  ", "root", expected_version=None,
                      taxonomy_version="v")
    assert team.adjudications.decide("t1", "bad_join", "step 2", "root", expected_version=None,
                      taxonomy_version="v").version == 1


def test_stale_version_is_a_conflict_naming_the_winner(team: Store) -> None:
    team.adjudications.decide("t1", "bad_join", "first look", "lea", expected_version=None,
                      taxonomy_version="v")
    team.users.add("max", "lead")
    team.adjudications.decide("t1", "wrong_table", "second look", "max", expected_version=1,
                      taxonomy_version="v")
    with pytest.raises(ConflictError, match=r"changed by max at .* UTC, reload"):
        team.adjudications.decide("t1", "other", "stale", "lea", expected_version=1,
                      taxonomy_version="v")
    with pytest.raises(ConflictError, match="changed by max"):
        team.adjudications.decide("t1", "other", "thought it was new", "lea", expected_version=None,
                      taxonomy_version="v")
    current = team.adjudications.get("t1")
    assert current is not None and (current.category, current.version) == ("wrong_table", 2)


def test_disagreements(team: Store) -> None:
    _label(team, "split", "ana", "wrong_table")
    _label(team, "split", "ben", "bad_join")
    _label(team, "agree", "ana", "bad_join")
    _label(team, "agree", "ben", "bad_join")
    _prelabel(team, "override", "wrong_table", 0.95)
    _label(team, "override", "ana", "bad_join")
    _prelabel(team, "unsure", "wrong_table", 0.4)
    _label(team, "unsure", "ana", "bad_join")
    found = {d.trajectory_id: d for d in team.adjudications.disagreements(prelabel_threshold=0.9)}
    assert set(found) == {"split", "override"}
    assert found["split"].kind == "humans_disagree"
    assert found["split"].human_categories == {"ana": "wrong_table", "ben": "bad_join"}
    assert found["override"].kind == "llm_overridden"
    assert found["override"].llm_confidence == pytest.approx(0.95)
    # A re-label that resolves the split removes it; adjudicated items drop out by default.
    _label(team, "split", "ben", "wrong_table")
    team.adjudications.decide("override", "bad_join", "LLM misread step 4", "lea",
                              expected_version=None, taxonomy_version="v")
    assert team.adjudications.disagreements(prelabel_threshold=0.9) == []
    everything = team.adjudications.disagreements(include_adjudicated=True)
    assert [d.trajectory_id for d in everything] == ["override"]


def test_final_label_provenance(team: Store) -> None:
    _label(team, "adj", "ana", "wrong_table")
    _label(team, "adj", "ben", "bad_join")
    team.adjudications.decide(
        "adj", "bad_join", "step 5 is the join", "lea", expected_version=None, first_error_step=5
    )
    _label(team, "agreed", "ana", "bad_join", step=3)
    _label(team, "agreed", "ben", "bad_join", step=4)
    _label(team, "single", "ana", "wrong_table", step=1)
    _label(team, "disputed", "ana", "wrong_table")
    _label(team, "disputed", "ben", "bad_join")
    _prelabel(team, "disputed", "wrong_table", 0.99)
    _prelabel(team, "llm", "bad_join", 0.6)
    team.prelabels.save(  # a failed pre-label is not an opinion
        PrelabelRecord(key=PrelabelKey("failed", "v1", "p1", "gemini-x"), result=None, error="429")
    )

    frame = team.adjudications.final_labels().set_index("trajectory_id")
    assert list(team.adjudications.final_labels().columns) == [
        "trajectory_id",
        "category",
        "secondary_category",
        "first_error_step",
        "provenance",
    ]
    assert set(frame.index) == {"adj", "agreed", "single", "disputed", "llm"}
    assert frame.loc["adj", "provenance"] == "adjudicated"
    assert (frame.loc["adj", "category"], frame.loc["adj", "first_error_step"]) == ("bad_join", 5)
    assert frame.loc["agreed", "provenance"] == "human_agreed"
    assert frame.loc["agreed", "first_error_step"] == 3  # tie -> earliest step
    assert (frame.loc["single", "provenance"], frame.loc["single", "category"]) == (
        "human_single",
        "wrong_table",
    )
    assert frame.loc["disputed", "provenance"] == "disputed"
    assert bool(frame["category"].isna().loc["disputed"])
    assert frame.loc["llm", "provenance"] == "llm_only"
    assert frame.loc["llm", "category"] == "bad_join"
    assert frame.loc["llm", "secondary_category"] == "other"
    other = team.adjudications.final_labels(taxonomy_version="v-other")
    assert other.empty is False  # adjudications stay
    assert set(other["trajectory_id"]) == {"adj"}


def test_history_is_appended_for_every_change_and_never_rewritten(team: Store) -> None:
    _label(team, "t1", "ana", "wrong_table")
    _label(team, "t1", "ana", "bad_join")
    team.adjudications.decide("t1", "bad_join", "clear", "lea", expected_version=None,
                      taxonomy_version="v")
    team.adjudications.decide("t1", "other", "on reflection", "lea", expected_version=1,
                      taxonomy_version="v")
    team.audits.create("a1", {"n": 1}, [{"task_id": "q1"}], ["ana"])
    team.audits.record_judgment("a1", "q1", "ana", True)
    team.audits.record_judgment("a1", "q1", "ana", False, reason="ambiguous")
    team.audits.decide(
        "a1", "q1", "lea", valid=False, reason="ambiguous", expected_version=None
    )

    entries = team.history.entries()
    assert [(h.entity, h.action) for h in entries] == [
        ("label", "create"),
        ("label", "relabel"),
        ("adjudication", "create"),
        ("adjudication", "update"),
        ("audit_judgment", "create"),
        ("audit_judgment", "update"),
        ("audit_adjudication", "create"),
    ]
    assert entries[3].before is not None and entries[3].before["category"] == "bad_join"
    assert entries[3].after is not None and entries[3].after["version"] == 2
    assert entries[3].reason == "on reflection"

    # More changes append; earlier rows stay byte-for-byte the same.
    _label(team, "t2", "ben", "wrong_table")
    assert team.history.entries()[: len(entries)] == entries
    # The database itself refuses to rewrite history.
    for statement in ("UPDATE history SET actor = 'mallory'", "DELETE FROM history"):
        with pytest.raises(DBAPIError, match="append-only"), team.engine.begin() as conn:
            conn.execute(text(statement))
    assert team.history.entries() == [*entries, team.history.entries()[-1]]


def test_history_table_names_every_actor_and_shows_no_none(team: Store) -> None:
    from labeling.store.history import history_table

    team.labels.add("t1", "bad_join", annotator="ana", taxonomy_version="v", note="mine")
    team.labels.add("t1", "other", annotator=None, source="llm", taxonomy_version="v")
    team.adjudications.decide("t1", "bad_join", "ana was right", "lea", expected_version=None,
                              taxonomy_version="v")
    rows = history_table(team.history.entries(entity_id="t1"), lambda key: key.upper())
    assert [(r["by"], r["category"], r["note / reason"]) for r in rows] == [
        ("ana", "BAD_JOIN", "mine"), ("LLM", "OTHER", ""), ("lea", "BAD_JOIN", "ana was right")]
    assert all(value not in ("None", "") for r in rows for value in (r["by"], r["at"]))


def test_people_only_final_labels_are_the_rows_a_person_stands_behind(team: Store) -> None:
    """What counts as confirmed needs no pre-label: the people-only read leaves out exactly the
    LLM-only rows, and answers the same for every other item."""
    _prelabel(team, "llm", "bad_join", 0.9)
    _prelabel(team, "single", "wrong_table", 0.9)
    _label(team, "single", "ana", "bad_join", step=2)
    _label(team, "agree", "ana", "bad_join")
    _label(team, "agree", "ben", "bad_join")
    _label(team, "split", "ana", "bad_join")
    _label(team, "split", "ben", "wrong_table")
    team.adjudications.decide("decided", "other", "read it", "lea", expected_version=None,
                              taxonomy_version="v1")
    every = team.adjudications.final_labels()
    people = team.adjudications.final_labels(people_only=True)
    expected = every[every["provenance"] != "llm_only"].reset_index(drop=True)
    assert _records(people) == _records(expected)
    assert set(people["trajectory_id"]) == {"single", "agree", "split", "decided"}


def _records(frame: pd.DataFrame) -> list[dict[str, object]]:
    """Rows as plain values, every kind of missing value as None (a filtered string column
    holds NaN where a fresh one holds None)."""
    return [{str(k): (None if pd.isna(v) else v) for k, v in row.items()}
            for row in frame.astype(object).to_dict("records")]
