"""`store.trajectory_ids`: carrying what the store holds on an old trajectory id to its new id
(a re-import changed it), with history, and never over what the new id already has."""

from __future__ import annotations

from labeling.store import OPERATOR, Store
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord


def _pre(tid: str, model: str = "m1") -> PrelabelRecord:
    return PrelabelRecord(PrelabelKey(tid, "v", "p1", model),
                          LabelResult("bad_join", 0.7, 2, "step 2: join", "gemini", "1",
                                      evidence={"step": 2}))


def test_rekey_moves_labels_prelabels_assignments_and_adjudication(team: Store) -> None:
    team.labels.add("old", "bad_join", annotator="ana", taxonomy_version="v")
    team.labels.add("old", "wrong_table", annotator="ben", taxonomy_version="v")
    team.labels.add("kept", "other", annotator="ana", taxonomy_version="v")
    team.prelabels.save(_pre("old"))
    team.queues.assign(["old"], ["ana"], overlap=1)
    team.adjudications.decide("old", "bad_join", "step 2 joins the wrong table", "lea",
                              expected_version=None, taxonomy_version="v")

    report = team.trajectory_ids.rekey({"old": "new"}, actor="import", reason="re-import")

    assert report.carried == {"old": {"labels": 2, "prelabels": 1, "assignments": 1,
                                      "adjudications": 1}}
    assert report.left == {}
    assert {lbl.annotator for lbl in team.labels.for_item("new", viewer=OPERATOR)} == {"ana", "ben"}
    assert team.labels.for_item("old", viewer=OPERATOR) == []
    assert [lbl.category for lbl in team.labels.for_item("kept", viewer=OPERATOR)] == ["other"]
    moved = team.prelabels.get(PrelabelKey("new", "v", "p1", "m1"))
    assert moved is not None and moved.result is not None
    assert moved.result.evidence == {"step": 2}
    assert team.prelabels.get(PrelabelKey("old", "v", "p1", "m1")) is None
    assert ("new", "ana") in {(t, u) for t, u, _ in team.queues.assignments()}
    adjudication = team.adjudications.get("new")
    assert adjudication is not None and adjudication.category == "bad_join"
    assert team.trajectory_ids.referencing(["old"]) == {}
    history = team.history.entries("trajectory", "old")
    assert [(h.action, h.actor, h.reason) for h in history] == [("rekey", "import", "re-import")]
    assert history[0].after is not None and history[0].after["trajectory_id"] == "new"


def test_rekey_leaves_what_the_new_id_already_has(team: Store) -> None:
    team.prelabels.save(_pre("old"))
    team.prelabels.save(_pre("new"))
    team.prelabels.save(_pre("old", model="m2"))
    team.labels.add("old", "bad_join", annotator="ana", taxonomy_version="v")
    team.adjudications.decide("old", "bad_join", "step 2", "lea", expected_version=None,
                              taxonomy_version="v")
    team.labels.add("new", "other", annotator="ben", taxonomy_version="v")
    team.adjudications.decide("new", "other", "no error", "lea", expected_version=None,
                              taxonomy_version="v")

    report = team.trajectory_ids.rekey({"old": "new"}, actor=None, reason="re-import")

    assert report.carried == {"old": {"labels": 1, "prelabels": 1}}
    assert report.left == {"old": {"adjudications": 1, "prelabels": 1}}
    # The new id's own adjudication and pre-label are untouched; the old ones stay reported.
    adjudication = team.adjudications.get("new")
    assert adjudication is not None and adjudication.category == "other"
    assert team.trajectory_ids.referencing(["old"]) == {"old": {"prelabels": 1,
                                                                "adjudications": 1}}


def test_referencing_counts_per_table(store: Store) -> None:
    store.users.add("ana", "annotator")
    store.labels.add("a", "bad_join", annotator="ana", taxonomy_version="v")
    store.labels.add("a", "other", annotator="ana", taxonomy_version="v")
    store.prelabels.save(_pre("b"))
    assert store.trajectory_ids.referencing(["a", "b", "c"]) == {
        "a": {"labels": 2}, "b": {"prelabels": 1}}
    assert store.trajectory_ids.rekey({}, actor=None, reason="x").carried == {}
