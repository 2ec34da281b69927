"""Counts over everyone's work are the store's decision too: in blind mode an annotator's
progress read holds their own queue only, and the distribution of every pre-label is for leads
and admins (and waits, for anyone but them, while the pre-label is hidden until commit)."""

from __future__ import annotations

from labeling.store import Store, Viewer
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord

V = "v"


def _seed(team: Store) -> None:
    team.queues.assign(["t1", "t2"], ["ana", "ben"], overlap=2, double_share=1.0)
    team.labels.add("t1", "wrong_table", annotator="ben", taxonomy_version=V)
    team.prelabels.save(PrelabelRecord(
        PrelabelKey("t2", V, "p1", "heuristic"),
        LabelResult(category="other", confidence=0.9, first_error_step=1, rationale="r",
                    labeller="heuristic", labeller_version="1"),
    ))


def test_progress_over_other_people_is_for_leads_in_blind_mode(team: Store) -> None:
    _seed(team)
    everyone = {p.annotator: p.done for p in team.queues.progress()}
    assert everyone == {"ana": 0, "ben": 1}

    def seen(viewer: Viewer, **kw: str) -> dict[str, int]:
        return {p.annotator: p.done for p in team.queues.progress(viewer=viewer, **kw)}

    assert seen(Viewer("ana", blind=True)) == {"ana": 0}  # ben's count is his work
    assert seen(Viewer("ana", blind=True), user="ben") == {}
    assert seen(Viewer(None, blind=True)) == {}  # nobody signed in
    assert seen(Viewer("newcomer", blind=True)) == {}
    assert seen(Viewer("lea", blind=True)) == everyone
    assert seen(Viewer("root", blind=True)) == everyone
    assert seen(Viewer("ana", blind=False)) == everyone
    assert seen(Viewer("ana", blind=False, hide_prelabel=True)) == everyone


def test_the_prelabel_distribution_follows_the_same_rule(team: Store) -> None:
    _seed(team)
    sees = team.prelabels.sees_distribution
    assert not sees(Viewer("ana", blind=True))
    assert not sees(Viewer(None, blind=True))
    assert sees(Viewer("lea", blind=True)) and sees(Viewer("root", blind=True))
    assert sees(Viewer("ana", blind=False))
    # Hidden until commit: counts over the hidden pre-labels would say what they are.
    assert not sees(Viewer("ana", blind=False, hide_prelabel=True))
    assert not sees(Viewer(None, blind=False, hide_prelabel=True))
    assert sees(Viewer("lea", blind=True, hide_prelabel=True))
    assert sees(Viewer("lea", blind=False, hide_prelabel=True))
