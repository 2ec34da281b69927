"""Label import/export and audit judgment import: round trips and all-or-nothing errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from labeling.store import (
    EXPORT_COLUMNS,
    JudgmentImportError,
    LabelImportError,
    Store,
    export_labels,
    import_audit_judgments,
    import_labels,
    open_store,
)
from tests.support import save_test_taxonomy

V = "v1"
KNOWN = {"t1", "t2", "t3"}
HEADER = "trajectory_id,annotator,source,category\n"


def _seed(store: Store) -> None:
    store.users.add("ana")
    store.labels.add(
        "t1",
        "wrong_table",
        annotator="ana",
        taxonomy_version="v1",
        first_error_step=2,
        confidence=0.75,
        note='says "step 2", with comma',
    )
    store.labels.add(
        "t2",
        "bad_join",
        annotator=None,
        source="llm",
        taxonomy_version="v1",
        secondary_category="other",
        confidence=0.9,
    )
    # A note typed with surrounding spaces and line breaks (CR LF and a lone CR).
    store.labels.add(
        "t2",
        "wrong_table",
        annotator="ana",
        taxonomy_version="v1",
        note="  first line\r\nsecond\rthird  ",
    )


def test_csv_columns_are_exact(store: Store) -> None:
    _seed(store)
    text = export_labels(store, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0].split(",") == EXPORT_COLUMNS
    assert rows[0]["note"] == 'says "step 2", with comma'
    assert rows[1]["annotator"] == "" and rows[1]["source"] == "llm"


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_round_trip(store: Store, fmt: str, tmp_path: Path) -> None:
    _seed(store)
    exported = export_labels(store, fmt)
    target = open_store(f"sqlite:///{tmp_path / 'copy.sqlite'}")
    save_test_taxonomy(target)
    try:
        assert (
            import_labels(target, exported, known_trajectory_ids=KNOWN,
                          default_taxonomy_version="v1") == 3
        )
        assert export_labels(target, fmt) == exported
        assert {lab.note for lab in target.labels.all()} >= {"  first line\r\nsecond\rthird  "}
        assert target.users.get("ana") is not None
        assert [h.action for h in target.history.entries("label")] == ["import"] * 3
        # A path works as well as content.
        path = tmp_path / f"labels.{fmt}"
        path.write_text(exported)
        assert (
            import_labels(target, str(path), known_trajectory_ids=KNOWN,
                          default_taxonomy_version="v1") == 3
        )
    finally:
        target.close()
    if fmt == "jsonl":
        assert json.loads(exported.splitlines()[0])["first_error_step"] == 2


def test_unknown_annotators_are_created_as_annotators(store: Store) -> None:
    text = HEADER + "t1,newbie,human,other\nt2,,llm,bad_join\n"
    assert import_labels(store, text, known_trajectory_ids=KNOWN, default_taxonomy_version=V) == 2
    user = store.users.get("newbie")
    assert user is not None and user.role == "annotator"
    assert store.labels.frame()["taxonomy_version"].tolist() == ["v1", "v1"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("t1,ana,human,other\nt9,ana,human,other\n", "row 2: unknown trajectory id 't9'"),
        ("t1,ana,human,other\nt2,ana,human,made_up\n", "row 2: unknown category 'made_up'"),
        ("t1,ana,robot,other\n", "row 1: source must be human or llm"),
        ("t1,,human,other\n", "row 1: a human label needs an annotator"),
    ],
)
def test_bad_rows_store_nothing(store: Store, body: str, message: str) -> None:
    with pytest.raises(LabelImportError) as info:
        import_labels(store, HEADER + body, known_trajectory_ids=KNOWN, default_taxonomy_version=V)
    assert message in str(info.value)
    assert store.labels.frame().empty and store.users.all() == [] and store.history.entries() == []


def test_missing_column_and_bad_values_store_nothing(store: Store) -> None:
    with pytest.raises(LabelImportError, match=r"missing column.*category"):
        import_labels(
            store,
            "trajectory_id,annotator,source\nt1,ana,human\n",
            known_trajectory_ids=KNOWN,
            default_taxonomy_version="v1",
        )
    with pytest.raises(LabelImportError, match=r"row 1: missing field.*source"):
        import_labels(
            store,
            '{"trajectory_id": "t1", "annotator": "a", "category": "other"}\n',
            known_trajectory_ids=KNOWN,
            default_taxonomy_version="v1",
        )
    bad_values = [
        ("first_error_step", "two", "row 1: first_error_step must be a whole number"),
        ("confidence", "1.5", "row 1: confidence must be in"),
        ("created_at", "yesterday", "row 1: created_at is not an ISO timestamp"),
    ]
    for column, value, message in bad_values:
        text = f"trajectory_id,annotator,source,category,{column}\nt1,ana,human,other,{value}\n"
        with pytest.raises(LabelImportError, match=message):
            import_labels(store, text, known_trajectory_ids=KNOWN, default_taxonomy_version=V)
    assert store.labels.frame().empty


# -- audit judgments ------------------------------------------------------------------------


@pytest.fixture
def audit(team: Store) -> Store:
    team.audits.create(
        "validity-1",
        {"runs": ["r1"], "n": 2, "seed": 1, "strata": {"Labs": 2}},
        [{"task_id": "q1", "intent": "Labs", "scope": "patient"}, {"task_id": "q2"}],
        ["ana", "ben"],
    )
    return team


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "judgments.csv"
    path.write_text("task_id,annotator,valid,reason,note,stage\n" + body)
    return path


def test_import_judgments(audit: Store, tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "q1,ana,1,,,\n"
        "q1,ben,false,ambiguous,unclear unit,review\n"
        "q2,ana,Valid,,,\n"
        "q3,newcomer,invalid,wrong_gt,,\n"
        "q1,lea,0,ambiguous,,adjudication\n",
    )
    assert import_audit_judgments(audit, path, "validity-1") == 5
    judged = {(j.task_id, j.annotator, j.stage): j for j in audit.audits.judgments("validity-1")}
    assert judged[("q1", "ana", "review")].valid is True
    assert judged[("q1", "ben", "review")].reason == "ambiguous"
    assert judged[("q2", "ana", "review")].valid is True
    assert judged[("q3", "newcomer", "review")].valid is False
    assert judged[("q1", "lea", "adjudication")].valid is False
    q3 = [i for i in audit.audits.items("validity-1") if i.task_id == "q3"]
    assert q3 and q3[0].intent is None and q3[0].scope is None and q3[0].position == 2
    user = audit.users.get("newcomer")
    assert user is not None and user.role == "annotator"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("q1,ana,1,,,\nq2,ana,maybe,,,\n", "row 2: valid must be"),
        ("q1,ana,1,,,\nq2,ana,1,,,final\n", "row 2: stage must be review or adjudication"),
        ("q1,ana,1,,,\n,ana,1,,,\n", "row 2: task_id is empty"),
        ("q1,ana,1,,,\nq2,,1,,,\n", "row 2: annotator is empty"),
        ("q1,ana,1,,,\nq1,ana,0,,,\n", "row 2: ana judged q1 (review) already in row 1"),
        ("q1,ana,1,,,,extra\n", "row 1: more values than columns"),
    ],
)
def test_bad_judgment_rows_store_nothing(
    audit: Store, tmp_path: Path, body: str, message: str
) -> None:
    with pytest.raises(JudgmentImportError) as info:
        import_audit_judgments(audit, _write(tmp_path, body), "validity-1")
    assert message in str(info.value)
    assert audit.audits.judgments("validity-1") == []
    assert len(audit.audits.items("validity-1")) == 2


def test_judgment_file_errors(audit: Store, tmp_path: Path) -> None:
    path = tmp_path / "j.csv"
    path.write_text("task_id,annotator,reason\nq1,ana,x\n")
    with pytest.raises(JudgmentImportError, match=r"missing column.*valid"):
        import_audit_judgments(audit, path, "validity-1")
    with pytest.raises(JudgmentImportError, match="unknown audit"):
        import_audit_judgments(audit, _write(tmp_path, "q1,ana,1,,,\n"), "nope")
    with pytest.raises(JudgmentImportError, match="row 1: unknown reason code"):
        import_audit_judgments(
            audit,
            _write(tmp_path, "q1,ana,0,vibes,,\n"),
            "validity-1",
            reasons={"ambiguous", "wrong_gt"},
        )
    assert audit.audits.judgments("validity-1") == []


def test_export_includes_llm_prelabels_with_their_rationale(store: Store) -> None:
    from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord

    _seed(store)
    key = PrelabelKey("t3", "v1", "rules-1", "heuristic")
    result = LabelResult("other", 0.4, 3, "step 3: a guess", "heuristic", "1")
    store.prelabels.save(PrelabelRecord(key, result))
    store.prelabels.save(PrelabelRecord(PrelabelKey("t1", "v1", "rules-1", "heuristic"), None,
                                        error="timeout"))  # failures are not labels
    rows = list(csv.DictReader(io.StringIO(export_labels(store, "csv"))))
    llm = [r for r in rows if r["trajectory_id"] == "t3"]
    assert len(llm) == 1 and len(rows) == 4
    assert llm[0]["source"] == "llm" and llm[0]["category"] == "other"
    assert llm[0]["note"] == "step 3: a guess" and llm[0]["first_error_step"] == "3"
    assert llm[0]["annotator"] == "heuristic:heuristic"
    assert len(list(csv.DictReader(io.StringIO(
        export_labels(store, "csv", include_prelabels=False))))) == 3
