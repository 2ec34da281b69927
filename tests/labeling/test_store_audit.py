"""Validity audits: assignment, blind review, locked verdicts."""

from __future__ import annotations

import pytest

from labeling.store import ConflictError, NotFoundError, PermissionDeniedError, Store, StoreError


@pytest.fixture
def audited(team: Store) -> Store:
    team.users.add("cy")
    items = [{"task_id": f"q{i}", "intent": "Labs", "template_id": f"tpl{i % 2}"} for i in range(6)]
    team.audits.create(
        "a1", {"runs": ["r1"], "n": 6, "seed": 0}, items, ["ana", "ben", "cy"], per_item=2
    )
    return team


def test_items_and_assignments(audited: Store) -> None:
    items = audited.audits.items("a1")
    assert [i.task_id for i in items] == [f"q{i}" for i in range(6)]
    assert all(len(i.annotators) == 2 for i in items)
    load = {name: sum(name in i.annotators for i in items) for name in ("ana", "ben", "cy")}
    assert load == {"ana": 4, "ben": 4, "cy": 4}
    assert audited.audits.all()[0] == ("a1", {"runs": ["r1"], "n": 6, "seed": 0})
    with pytest.raises(ConflictError):
        audited.audits.create("a1", {}, [], ["ana"])
    with pytest.raises(NotFoundError):
        audited.audits.items("nope")


def test_blind_review(audited: Store) -> None:
    audited.audits.record_judgment("a1", "q0", "ana", True)
    audited.audits.record_judgment("a1", "q0", "ben", False, reason="ambiguous",
                                   note="two readings")
    mine = audited.audits.judgments_visible_to("ana", "a1")
    assert [(j.annotator, j.valid) for j in mine] == [("ana", True)]
    assert len(audited.audits.judgments_visible_to("lea", "a1")) == 2
    assert len(audited.audits.judgments("a1")) == 2
    # A second judgment at the same stage replaces the first.
    audited.audits.record_judgment("a1", "q0", "ana", False, reason="wrong_gt")
    [again] = audited.audits.judgments_visible_to("ana", "a1")
    assert (again.valid, again.reason) == (False, "wrong_gt")
    with pytest.raises(StoreError):
        audited.audits.record_judgment("a1", "q0", "ana", True, stage="final")
    with pytest.raises(NotFoundError):
        audited.audits.record_judgment("a1", "q99", "ana", True)


def test_audit_verdict_is_locked_and_lead_only(audited: Store) -> None:
    with pytest.raises(PermissionDeniedError):
        audited.audits.decide(
            "a1", "q0", "ana", valid=True, reason="ok", expected_version=None
        )
    first = audited.audits.decide(
        "a1", "q0", "lea", valid=False, reason="ambiguous", expected_version=None
    )
    audited.users.add("max", "lead")
    second = audited.audits.decide(
        "a1", "q0", "max", valid=True, reason="fine", expected_version=first.version
    )
    assert second.version == 2
    with pytest.raises(ConflictError, match="changed by max"):
        audited.audits.decide(
            "a1", "q0", "lea", valid=False, reason="stale", expected_version=1
        )
    [verdict] = audited.audits.adjudications("a1")
    assert (verdict.valid, verdict.decided_by, verdict.version) == (True, "max", 2)


def test_unknown_annotators_are_refused_before_anything_is_written(audited: Store) -> None:
    with pytest.raises(NotFoundError, match="unknown users nobody, ghost") as err:
        audited.audits.create("typo", {}, [{"task_id": "q1"}], ["ana", "nobody", "ghost"])
    assert "no audit was created" in str(err.value)
    assert [name for name, _ in audited.audits.all()] == ["a1"]
    assert {u.name for u in audited.users.all()} == {"ana", "ben", "cy", "lea", "root"}


def test_archiving_is_a_lead_action_that_keeps_everything(audited: Store) -> None:
    audited.audits.record_judgment("a1", "q0", "ana", True)
    with pytest.raises(PermissionDeniedError):
        audited.audits.archive("a1", actor="ana")
    assert audited.audits.archived() == {}
    audited.audits.archive("a1", actor="lea")
    assert set(audited.audits.archived()) == {"a1"}
    assert audited.audits.all(include_archived=False) == []
    assert [n for n, _ in audited.audits.all()] == ["a1"]
    assert len(audited.audits.judgments("a1")) == 1  # nothing deleted
    audited.audits.archive("a1", actor=None, archived=False)  # the command line restores
    assert audited.audits.archived() == {}
    entries = audited.history.entries("audit", "a1")
    assert [(h.action, h.actor) for h in entries] == [("archive", "lea"), ("unarchive", None)]
    with pytest.raises(NotFoundError):
        audited.audits.archive("nope", actor="lea")
