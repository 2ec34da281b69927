"""Labels, blind visibility, assignment and queue order."""

from __future__ import annotations

from collections import Counter

import pytest

from labeling.store import NotFoundError, Store, StoreError
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord


def _prelabel(store: Store, tid: str, confidence: float, category: str = "wrong_table") -> None:
    store.prelabels.save(
        PrelabelRecord(
            key=PrelabelKey(tid, "v1", "p1", "heuristic"),
            result=LabelResult(category, confidence, 2, "step 2: ...", "heuristic", "1"),
        )
    )


def test_add_label_and_relabel_history(team: Store) -> None:
    first = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1")
    second = team.labels.add(
        "t1",
        "bad_join",
        annotator="ana",
        taxonomy_version="v1",
        prelabel_shown=True,
        seconds_on_item=12.5,
        first_error_step=3,
        confidence=0.7,
        note="step 3 joins wrong",
    )
    assert second.id != first.id and second.prelabel_shown and second.seconds_on_item == 12.5
    actions = [(h.action, h.actor) for h in team.history.entries("label", "t1")]
    assert actions == [("create", "ana"), ("relabel", "ana")]
    relabel = team.history.entries("label", "t1")[1]
    assert relabel.before is not None and relabel.before["category"] == "wrong_table"
    assert relabel.after is not None and relabel.after["category"] == "bad_join"
    frame = team.labels.frame()
    assert list(frame["category"]) == ["wrong_table", "bad_join"]


def test_the_same_label_again_is_stored_once(team: Store) -> None:
    """A retried key (an answer lost in an outage, a key pressed twice) stores nothing new; a
    label that differs in any field of its content supersedes as before."""
    first = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1",
                            first_error_step=2, note="n", seconds_on_item=3.0)
    again = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1",
                            first_error_step=2, note="n", seconds_on_item=9.0,
                            prelabel_shown=True)
    assert again.id == first.id and again.seconds_on_item == 3.0
    assert len(team.labels.frame()) == 1
    assert [h.action for h in team.history.entries("label", "t1")] == ["create"]
    # Another step, another note or another category is a new label; and the same label by
    # someone else is theirs.
    moved = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1",
                            first_error_step=3, note="n")
    renoted = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1",
                              first_error_step=3, note=None)
    other = team.labels.add("t1", "wrong_table", annotator="ben", taxonomy_version="v1",
                            first_error_step=3)
    assert len({first.id, moved.id, renoted.id, other.id}) == 4
    # After an Undo the retracted label is no longer the one that counts: saving it again
    # records it again.
    team.labels.retract_latest("t1", annotator="ana")
    back = team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1",
                           first_error_step=3, note=None)
    assert back.id not in {first.id, moved.id, renoted.id, other.id}
    assert len(team.labels.frame()) == 4  # the retracted one counts nowhere


def test_label_validation(team: Store) -> None:
    with pytest.raises(NotFoundError):
        team.labels.add("t1", "c", annotator="ghost", taxonomy_version="v1")
    with pytest.raises(StoreError):
        team.labels.add("t1", "c", annotator=None, taxonomy_version="v1")  # human needs a name
    llm = team.labels.add("t1", "c", annotator=None, source="llm", taxonomy_version="v1")
    assert llm.annotator is None and llm.source == "llm"


def test_blind_mode_hides_other_annotators(team: Store) -> None:
    team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version="v1")
    team.labels.add("t1", "bad_join", annotator="ben", taxonomy_version="v1")
    team.labels.add("t1", "bad_join", annotator=None, source="llm", taxonomy_version="v1")

    def seen(viewer: str | None, blind: bool, **kw: bool) -> list[str | None]:
        found = team.labels.for_item("t1", viewer=viewer, blind=blind, **kw)
        return [lab.annotator for lab in found]

    # Annotators see only their own, even after they have submitted.
    assert seen("ana", True) == ["ana", None]
    assert seen("ben", True, include_llm=False) == ["ben"]
    assert seen("lea", True) == ["ana", "ben", None]  # lead
    assert seen("root", True) == ["ana", "ben", None]  # admin
    assert seen("ana", False) == ["ana", "ben", None]
    assert seen(None, True, include_llm=False) == []
    team.users.add("cy")
    assert seen("cy", True, include_llm=False) == []  # nothing of theirs yet, nothing else


def test_overlap_assignment_counts(team: Store) -> None:
    team.users.add("cy")
    ids = [f"t{i:03d}" for i in range(100)]
    created = team.queues.assign(ids, ["ana", "ben", "cy"], overlap=2, double_share=0.2, seed=7)
    per_item = Counter(t for t, _, _ in team.queues.assignments())
    assert Counter(per_item.values()) == {1: 80, 2: 20}
    assert created == 120
    loads = Counter(name for _, name, _ in team.queues.assignments())
    assert max(loads.values()) - min(loads.values()) <= 1  # balanced
    # Idempotent, and deterministic for a seed.
    assert team.queues.assign(ids, ["ana", "ben", "cy"], overlap=2, double_share=0.2, seed=7) == 0
    assert {p.annotator: p.assigned for p in team.queues.progress()} == dict(loads)


def test_stratified_double_share(team: Store) -> None:
    ids = [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(30)]
    strata = {t: t[0] for t in ids}
    team.queues.assign(ids, ["ana", "ben"], overlap=2, double_share=0.5, seed=1, strata=strata)
    doubled = {t for t, n in Counter(t for t, _, _ in team.queues.assignments()).items() if n == 2}
    assert sum(t.startswith("a") for t in doubled) == 5
    assert sum(t.startswith("b") for t in doubled) == 15


def test_queue_low_confidence_first_then_unlabelled_then_spot_checks(team: Store) -> None:
    low = {"l1": 0.2, "l2": 0.5, "l3": 0.1}
    confident = [f"c{i:02d}" for i in range(20)]
    for tid, conf in low.items():
        _prelabel(team, tid, conf)
    for tid in confident:
        _prelabel(team, tid, 0.95)
    ids = ["n1", *low, *confident, "n2"]
    team.queues.assign(ids, ["ana"], overlap=1, seed=0)

    queue = team.queues.next_items("ana", prelabel_threshold=0.8, spot_check_share=0.25, seed=3)
    assert queue[:3] == ["l3", "l1", "l2"]  # ascending confidence
    assert set(queue[3:5]) == {"n1", "n2"}  # no pre-label: after the low-confidence ones
    spot = queue[5:]
    assert len(spot) == 5 and set(spot) <= set(confident)  # 25% of 20 confident items
    def next_for(seed: int) -> list[str]:
        return team.queues.next_items(
            "ana", prelabel_threshold=0.8, spot_check_share=0.25, seed=seed
        )

    assert next_for(3) == queue
    other_seed = next_for(4)
    assert other_seed[5:] != spot

    # Labelled items leave the queue; the spot-check sample does not drift.
    team.labels.add("l3", "bad_join", annotator="ana", taxonomy_version="v1")
    team.labels.add(spot[0], "bad_join", annotator="ana", taxonomy_version="v1")
    after = team.queues.next_items("ana", prelabel_threshold=0.8, spot_check_share=0.25, seed=3)
    assert after == [t for t in queue if t not in {"l3", spot[0]}]
    assert team.queues.next_items("ana", spot_check_share=0.0, limit=2) == ["l1", "l2"]
    assert {p.annotator: (p.assigned, p.done) for p in team.queues.progress()} == {"ana": (25, 2)}


def test_a_persons_queue_and_progress_read_their_items_only(team: Store) -> None:
    """A page asks both on every key: they read the person's own rows, and answer as the
    store-wide reads do for that person. A pre-label on an item of someone else's queue does
    not move theirs."""
    _prelabel(team, "a1", 0.3)
    _prelabel(team, "b1", 0.1)  # ben's item, less sure than any of ana's
    team.queues.assign(["a1", "a2", "a3"], ["ana"], overlap=1, seed=0)
    team.queues.assign(["b1", "b2"], ["ben"], overlap=1, seed=0)
    team.labels.add("a3", "bad_join", annotator="ana", taxonomy_version="v1")
    team.labels.add("b2", "bad_join", annotator="ben", taxonomy_version="v1")
    assert team.queues.next_items("ana", prelabel_threshold=0.8,
                                  spot_check_share=0.0) == ["a1", "a2"]
    assert team.queues.next_items("ben", prelabel_threshold=0.8, spot_check_share=0.0) == ["b1"]
    everyone = {p.annotator: p for p in team.queues.progress()}
    for name in ("ana", "ben"):
        assert team.queues.progress(user=name) == [everyone[name]]
    assert team.queues.progress(user="lea") == []  # nothing assigned to her


def test_a_persons_queue_is_one_read_that_agrees_with_the_separate_reads(team: Store) -> None:
    """`queue_of` is what a page asks on every key: its order, counts and verdict-decided items
    equal `next_items`, `progress(user=)` and `verdicts.for_queue` (a lead's verdict over the
    person's own, a colleague's never), and it costs a handful of statements whatever the
    store holds."""
    from sqlalchemy import event

    _prelabel(team, "a1", 0.3)
    _prelabel(team, "a4", 0.95)
    team.queues.assign(["a1", "a2", "a3", "a4", "a5", "a6"], ["ana"], overlap=1, seed=0)
    team.queues.assign(["a1", "b1"], ["ben"], overlap=1, seed=0, queue="second")
    team.labels.add("a3", "bad_join", annotator="ana", taxonomy_version="v1")
    team.verdicts.record("a2", "correct", "ana")      # her own: right
    team.verdicts.record("a5", "correct", "ana")
    team.verdicts.record("a5", "incorrect", "lea")    # a lead's latest wins over hers
    team.verdicts.record("a6", "correct", "ben")      # a colleague's moves nothing of hers
    team.verdicts.record("b1", "correct", "lea")      # not her item
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(team.engine, "before_cursor_execute", count)
    try:
        mine = team.queues.queue_of("ana", prelabel_threshold=0.8, spot_check_share=1.0)
    finally:
        event.remove(team.engine, "before_cursor_execute", count)
    assert mine.todo == team.queues.next_items("ana", prelabel_threshold=0.8,
                                               spot_check_share=1.0)
    [progress] = team.queues.progress(user="ana")
    assert (mine.assigned, mine.done) == (progress.assigned, progress.done) == (6, 1)
    decided = team.verdicts.for_queue("ana")  # over every item: b1 is not hers
    assert mine.judged_right == {t for t, right in decided.items()
                                 if right and t.startswith("a")} == {"a2"}
    assert decided["a5"] is False and "a6" not in decided
    # The user, the assignments, the labels, the pre-labels (two at most) and the verdicts.
    assert len(statements) <= 6, statements
    assert team.queues.queue_of("ben", prelabel_threshold=0.8,
                                spot_check_share=0.0).judged_right == frozenset({"b1"})
