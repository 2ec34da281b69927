"""People's verdicts in the store (SQLite and PostgreSQL): kept with who gave them, the latest
per person counts, an undone one is history, leads decide disagreements, blind mode hides
other people's, and a trajectory judged right leaves the failure queue."""

from __future__ import annotations

import pytest

from labeling.queue import queue_for
from labeling.store import OPERATOR, Store, StoreError, Viewer


def test_the_latest_verdict_of_each_person_counts_and_an_undone_one_is_history(
        team: Store) -> None:
    team.verdicts.record("t1", "incorrect", "ana")
    team.verdicts.record("t1", "correct", "ana", note="the prose states 2,845 mL")
    assert team.verdicts.effective() == {"t1": True}
    (latest,) = team.verdicts.for_item("t1")
    assert (latest.annotator, latest.role, latest.note) == ("ana", "annotator",
                                                            "the prose states 2,845 mL")
    undone = team.verdicts.retract("t1", "ana")
    assert undone is not None and undone.retracted_at is not None
    assert team.verdicts.effective() == {"t1": False}  # her earlier verdict counts again
    history = team.verdicts.visible(OPERATOR, history=True)
    assert [v.verdict for v in history] == ["incorrect", "correct"]
    assert history[1].retracted_at is not None
    assert team.verdicts.retract("t9", "ana") is None


def test_a_lead_decides_and_annotators_who_disagree_leave_it_open(team: Store) -> None:
    team.verdicts.record("t1", "correct", "ana")
    team.verdicts.record("t1", "incorrect", "ben")
    assert team.verdicts.effective() == {"t1": None}  # open: no lead has decided
    team.verdicts.record("t1", "incorrect", "lea")
    assert team.verdicts.effective() == {"t1": False}


def test_blind_mode_shows_an_annotator_only_their_own_verdicts(team: Store) -> None:
    team.verdicts.record("t1", "correct", "ana")
    team.verdicts.record("t2", "incorrect", "ben")
    assert team.verdicts.effective(Viewer("ben", blind=True)) == {"t2": False}
    assert team.verdicts.for_item("t1", Viewer("ben", blind=True)) == []
    assert team.verdicts.effective(Viewer("ben", blind=False)) == {"t1": True, "t2": False}
    assert team.verdicts.effective(Viewer("lea", blind=True)) == {"t1": True, "t2": False}
    assert team.verdicts.effective(Viewer(None, blind=True)) == {}  # nobody signed in


def test_bad_verdicts_are_refused(team: Store) -> None:
    with pytest.raises(StoreError, match="one of correct, incorrect"):
        team.verdicts.record("t1", "maybe", "ana")
    with pytest.raises(StoreError, match="unknown user"):
        team.verdicts.record("t1", "correct", "nobody")
    assert team.verdicts.effective() == {}


def test_judged_right_leaves_the_queue_of_its_judge_and_everyone_after_a_lead(
        team: Store) -> None:
    team.queues.assign(["t1", "t2"], ["ana", "ben"], overlap=2, double_share=1.0)

    def queue(user: str) -> list[str]:
        return queue_for(team, ["t1", "t2"], user, prelabel_threshold=0.9,
                         spot_check_share=0.0)

    team.verdicts.record("t1", "correct", "ana")
    assert queue("ana") == ["t2"]
    assert queue("ben") == ["t1", "t2"]  # blind double annotation: ben still judges t1
    team.verdicts.record("t2", "correct", "lea")
    assert queue("ana") == [] and queue("ben") == ["t1"]
    # A failure verdict keeps the item: it still needs its failure label.
    team.verdicts.record("t1", "incorrect", "ben")
    assert queue("ben") == ["t1"]
