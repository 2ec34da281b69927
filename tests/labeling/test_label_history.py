"""Honest history: a label undone (retracted) or replaced is kept, exported with what became of
it, brought back as it was by an import, and shown only to its author and to leads."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from labeling.rater_agreement import latest_human_labels
from labeling.store import Store, open_store
from labeling.store.io import export_labels, import_labels
from labeling.store.policy import Viewer
from tests.support import save_test_taxonomy

KNOWN = {"t1", "t2"}


def _rows(store: Store, **kwargs: object) -> list[dict[str, str]]:
    text = export_labels(store, "csv", include_prelabels=False, **kwargs)  # type: ignore[arg-type]
    return list(csv.DictReader(io.StringIO(text)))


def _undo_and_replace(team: Store) -> tuple[int, int]:
    """ana labels t1, undoes it and labels it again (the issue's case)."""
    first = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1",
                            note="first thought")
    team.labels.retract_latest("t1", annotator="ana")
    second = team.labels.add("t1", "bad_join", annotator="ana", taxonomy_version="v1")
    return first.id, second.id


def test_an_undone_and_replaced_label_is_in_the_export(team: Store) -> None:
    first, second = _undo_and_replace(team)
    rows = _rows(team)
    assert [(r["label_id"], r["category"]) for r in rows] == [
        (str(first), "wrong_table"), (str(second), "bad_join")]
    undone, current = rows
    assert undone["superseded_by"] == str(second) and undone["retracted_by"] == "ana"
    assert undone["retracted_at"] and undone["note"] == "first thought"
    assert current["superseded_by"] == current["retracted_at"] == current["retracted_by"] == ""
    # Leaving the history out gives the labels that count now.
    assert [r["label_id"] for r in _rows(team, include_history=False)] == [str(second)]
    lines = [json.loads(x) for x in export_labels(team, "jsonl", include_prelabels=False)
             .splitlines()]
    assert [(x["label_id"], x["superseded_by"], x["retracted_by"]) for x in lines] == [
        (first, second, "ana"), (second, None, None)]


def test_a_relabel_is_superseded_and_an_undo_makes_the_earlier_label_current(
    team: Store,
) -> None:
    a = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1")
    b = team.labels.add("t1", "bad_join", annotator="ana", taxonomy_version="v1")
    c = team.labels.add("t1", "bad_join", annotator="ben", taxonomy_version="v1")
    by_id = {e.label.id: e for e in team.labels.entries()}
    assert by_id[a.id].superseded_by == b.id and not by_id[a.id].current
    assert by_id[b.id].current and by_id[c.id].current  # ben's label supersedes nothing of ana
    team.labels.retract_latest("t1", annotator="ana")  # undo b: a counts again
    by_id = {e.label.id: e for e in team.labels.entries()}
    assert by_id[a.id].current
    assert by_id[b.id].retracted_by == "ana" and by_id[b.id].superseded_by is None
    assert [e.label.id for e in team.labels.entries(history=False)] == [a.id, c.id]


def test_history_is_shown_to_its_author_and_to_leads_only(team: Store) -> None:
    first, second = _undo_and_replace(team)
    team.labels.add("t2", "bad_join", annotator="ben", taxonomy_version="v1")
    for blind in (True, False):
        ana, ben, lea = (Viewer(n, blind=blind) for n in ("ana", "ben", "lea"))
        assert {e.label.id for e in team.labels.entries(ana)} >= {first, second}
        assert first in {e.label.id for e in team.labels.entries(lea)}
        assert [lab.id for lab, _, _ in team.labels.retracted("t1", viewer=lea)] == [first]
        # A colleague never sees the undone label (blind off: the counted one, yes).
        seen_by_ben = {e.label.id for e in team.labels.entries(ben)}
        assert first not in seen_by_ben and (second in seen_by_ben) is (not blind)
        assert team.labels.retracted("t1", viewer=ben) == []
        assert "first thought" not in export_labels(team, "csv", viewer=ben)
        assert "first thought" in export_labels(team, "csv", viewer=ana)
        assert all(h.actor != "ana" for h in team.history.entries("label", viewer=ben))
        assert any(h.action == "retract" for h in team.history.entries("label", viewer=ana))
        assert any(h.action == "retract" for h in team.history.entries("label", viewer=lea))


def test_a_lead_assigned_to_the_item_sees_no_history_until_they_label_it(team: Store) -> None:
    first, _ = _undo_and_replace(team)
    team.queues.assign(["t1"], ["lea"], overlap=1)
    lea = Viewer("lea")
    assert team.labels.entries(lea) == [] and team.labels.retracted("t1", viewer=lea) == []
    assert team.history.entries("label", "t1", viewer=lea) == []
    team.labels.add("t1", "bad_join", annotator="lea", taxonomy_version="v1")
    assert first in {e.label.id for e in team.labels.entries(lea)}


def test_the_history_survives_an_export_and_import(team: Store, tmp_path: Path) -> None:
    _undo_and_replace(team)
    team.labels.add("t2", "wrong_table", annotator="ben", taxonomy_version="v1")
    team.labels.retract_latest("t2", annotator="ben")  # undone, nothing replaced it
    for fmt in ("csv", "jsonl"):
        exported = export_labels(team, fmt)
        target = open_store(f"sqlite:///{tmp_path / f'copy-{fmt}.sqlite'}")
        save_test_taxonomy(target)
        try:
            assert import_labels(target, exported, known_trajectory_ids=KNOWN,
                                 default_taxonomy_version="v1") == 3
            assert export_labels(target, fmt) == exported
            # The undone labels came back undone: they count nowhere.
            assert latest_human_labels(target) == {"ana": {"t1": "bad_join"}}
            assert [(lab.category, by) for lab, by, _ in target.labels.retracted("t2")] == [
                ("wrong_table", "ben")]
        finally:
            target.close()
