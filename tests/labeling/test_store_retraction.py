"""Label retraction (Undo): kept as history, counted nowhere, the item back in the queue."""

from __future__ import annotations

import pytest

from labeling.rater_agreement import latest_human_labels
from labeling.store import NotFoundError, Store, StoreError
from labeling.store.io import export_labels


def _queue(store: Store, user: str) -> list[str]:
    return store.queues.next_items(user, prelabel_threshold=0.8, spot_check_share=0.0)


def test_retracted_label_reopens_the_item_and_counts_nowhere(team: Store) -> None:
    team.queues.assign(["t1", "t2"], ["ana", "ben"], overlap=2, double_share=1.0)
    team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1",
                    note="ANA-RETRACT-NOTE")
    team.labels.add("t1", "bad_join", annotator="ben", taxonomy_version="v1")
    assert _queue(team, "ana") == ["t2"]
    assert {p.annotator: p.done for p in team.queues.progress()} == {"ana": 1, "ben": 1}
    assert [d.trajectory_id for d in team.adjudications.disagreements()] == ["t1"]

    gone = team.labels.retract_latest("t1", annotator="ana")
    assert gone is not None and gone.category == "wrong_table" and gone.annotator == "ana"

    # Back in the queue, progress decremented, and no reader counts it any more.
    assert _queue(team, "ana") == ["t1", "t2"]
    assert {p.annotator: p.done for p in team.queues.progress()} == {"ana": 0, "ben": 1}
    assert [lab.annotator for lab in team.labels.for_item("t1", viewer=None, blind=False)] == [
        "ben"]
    assert list(team.labels.frame()["annotator"]) == ["ben"]
    assert [lab.annotator for lab in team.labels.all()] == ["ben"]
    assert latest_human_labels(team) == {"ben": {"t1": "bad_join"}}
    assert team.adjudications.disagreements() == []  # one human left: nothing to adjudicate
    final = team.adjudications.final_labels()
    assert list(final["provenance"]) == ["human_single"]
    # The export leaves it out of the labels that count (--no-history) ...
    assert "ANA-RETRACT-NOTE" not in export_labels(team, "csv", include_history=False)

    # ... but it stays in the history, with who retracted it and when (in the export too).
    assert "ANA-RETRACT-NOTE" in export_labels(team, "csv")
    [(label, by, when)] = team.labels.retracted("t1")
    assert (label.id, label.note, by) == (gone.id, "ANA-RETRACT-NOTE", "ana")
    assert when is not None
    actions = [(h.action, h.actor) for h in team.history.entries("label", "t1")]
    assert ("retract", "ana") in actions
    retract = next(h for h in team.history.entries("label", "t1") if h.action == "retract")
    assert retract.before is not None and retract.before["retracted_at"] is None
    assert retract.after is not None and retract.after["retracted_at"] is not None


def test_undo_of_a_relabel_brings_back_the_previous_label(team: Store) -> None:
    team.queues.assign(["t1"], ["ana"], overlap=1)
    team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1")
    team.labels.add("t1", "bad_join", annotator="ana", taxonomy_version="v1")
    assert latest_human_labels(team) == {"ana": {"t1": "bad_join"}}

    undone = team.labels.retract_latest("t1", annotator="ana")
    assert undone is not None and undone.category == "bad_join"
    assert latest_human_labels(team) == {"ana": {"t1": "wrong_table"}}
    assert _queue(team, "ana") == []  # still labelled: by the earlier label

    assert team.labels.retract_latest("t1", annotator="ana") is not None
    assert _queue(team, "ana") == ["t1"]
    assert team.labels.retract_latest("t1", annotator="ana") is None  # nothing left to undo
    # A new label after the undo is a fresh one; the retracted two stay in history.
    team.labels.add("t1", "bad_join", annotator="ana", taxonomy_version="v1")
    assert _queue(team, "ana") == [] and len(team.labels.retracted("t1")) == 2


def test_who_may_retract(team: Store) -> None:
    mine = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1")
    with pytest.raises(StoreError, match="may not retract"):
        team.labels.retract(mine.id, actor="ben")
    with pytest.raises(NotFoundError):
        team.labels.retract(mine.id, actor="ghost")
    with pytest.raises(NotFoundError):
        team.labels.retract(mine.id + 1000, actor="ana")
    llm = team.labels.add("t1", "bad_join", annotator=None, source="llm", taxonomy_version="v1")
    with pytest.raises(StoreError, match="human"):
        team.labels.retract(llm.id, actor="lea")
    team.labels.retract(mine.id, actor="lea")  # a lead may
    with pytest.raises(StoreError, match="already retracted"):
        team.labels.retract(mine.id, actor="ana")
    [(_, by, _)] = team.labels.retracted("t1")
    assert by == "lea"
