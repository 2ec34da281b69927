"""The Annotate ranking reads the workspace's failures once per workspace state and the
confirmed labels once per store revision, not on every label key (opinions.ranking)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import opinions.learn.confirmed as confirmed_module
import opinions.ranking as queue
from labeling.store import Store
from opinions.learn.classifier import MIN_LABELS
from opinions.ranking import classifier_ranking, failed_frame, store_revision
from tests.labeling.support import sqlite_store_with_annotator
from trajectories.workspace import Workspace


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    st = sqlite_store_with_annotator(tmp_path)
    yield st
    st.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the ranking read the failures and the confirmed labels (from a clean cache)."""
    counts = {"failures": 0, "confirmed": 0}
    real_failed, real_confirmed = queue.failed_frame, confirmed_module.confirmed_gold

    def failures(ws: Workspace) -> Any:
        counts["failures"] += 1
        return real_failed(ws)

    def confirmed(store: Store, *args: Any) -> Any:
        counts["confirmed"] += 1
        return real_confirmed(store, *args)

    monkeypatch.setattr(queue, "_INPUTS", {})
    # What is read when a refit is considered (the interval between fits has its own test).
    monkeypatch.setattr(queue, "REFIT_INTERVAL_S", 0.0)
    monkeypatch.setattr(queue, "failed_frame", failures)
    monkeypatch.setattr(confirmed_module, "confirmed_gold", confirmed)
    return counts


def _label(store: Store, tid: str, category: str = "sql_logic_error") -> None:
    store.labels.add(tid, category, annotator="ana", taxonomy_version="v")


def test_failures_are_read_once_and_labels_once_per_revision(
    store: Store, demo_workspace: Path, reads: dict[str, int]
) -> None:
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    for tid in failed[:3]:
        _label(store, tid)
    assert classifier_ranking(store, ws, min_labels=MIN_LABELS) is None  # too few labels
    assert classifier_ranking(store, ws, min_labels=MIN_LABELS) is None
    assert reads == {"failures": 1, "confirmed": 1}  # nothing changed: nothing read again

    before = store_revision(store)
    _label(store, failed[3], "semantic_misunderstanding")
    assert store_revision(store) != before
    classifier_ranking(store, ws, min_labels=MIN_LABELS)
    assert reads == {"failures": 1, "confirmed": 2}  # a new label: the labels, not the failures

    # An undo changes what counts although no label row is added: read again too.
    assert store.labels.retract_latest(failed[3], annotator="ana") is not None
    classifier_ranking(store, ws, min_labels=MIN_LABELS)
    assert reads == {"failures": 1, "confirmed": 3}


def test_enough_labels_after_cached_reads_give_a_ranking(
    store: Store, demo_workspace: Path, reads: dict[str, int]
) -> None:
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    keys = ["sql_logic_error", "semantic_misunderstanding"]
    for n, tid in enumerate(failed[:MIN_LABELS - 1]):
        _label(store, tid, keys[n % 2])
    assert classifier_ranking(store, ws, min_labels=MIN_LABELS, failed_ids=failed) is None
    assert reads["failures"] == 0  # the caller's failures were used, the workspace not read
    _label(store, failed[MIN_LABELS - 1], keys[0])  # the label that makes it ready
    ranking = classifier_ranking(store, ws, min_labels=MIN_LABELS, wait=True, failed_ids=failed)
    assert ranking is not None and set(ranking) == set(failed)


def test_after_a_fit_the_labels_are_read_only_once_enough_changes_are_logged(
    store: Store, demo_workspace: Path, reads: dict[str, int]
) -> None:
    """Each key of a team changes the store; while fewer changes were logged since the fit
    than a refit needs (a tenth of the labels it learned), the labels are not read at all."""
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    keys = ["sql_logic_error", "semantic_misunderstanding"]
    for n, tid in enumerate(failed[:30]):
        _label(store, tid, keys[n % 2])
    first = classifier_ranking(store, ws, min_labels=MIN_LABELS, wait=True, failed_ids=failed)
    assert first is not None and reads["confirmed"] == 1
    for tid in failed[30:32]:  # two changes logged: a refit needs three
        _label(store, tid)
    assert classifier_ranking(store, ws, min_labels=MIN_LABELS, failed_ids=failed) == first
    assert reads["confirmed"] == 1
    _label(store, failed[32])  # the third: read, and fitted again on 33 labels
    again = classifier_ranking(store, ws, min_labels=MIN_LABELS, wait=True, failed_ids=failed)
    assert reads["confirmed"] == 2 and again is not None and again != first


def test_logged_rows_that_change_no_label_are_counted_once(
    store: Store, demo_workspace: Path, reads: dict[str, int]
) -> None:
    """Verdicts log rows too but change no label: once the labels were compared after them,
    the next keys do not read the labels again until a refit's worth of changes is logged."""
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    keys = ["sql_logic_error", "semantic_misunderstanding"]
    for n, tid in enumerate(failed[:30]):
        _label(store, tid, keys[n % 2])
    first = classifier_ranking(store, ws, min_labels=MIN_LABELS, wait=True, failed_ids=failed)
    assert first is not None and reads["confirmed"] == 1
    for tid in failed[40:45]:  # five logged rows, no label changed
        store.verdicts.record(tid, "incorrect", "ana")
    assert classifier_ranking(store, ws, min_labels=MIN_LABELS, failed_ids=failed) == first
    assert reads["confirmed"] == 2  # compared once: nothing changed
    for tid in failed[30:32]:  # two label changes: a refit needs three
        _label(store, tid)
        assert classifier_ranking(store, ws, min_labels=MIN_LABELS, failed_ids=failed) == first
    assert reads["confirmed"] == 2
    _label(store, failed[32])
    again = classifier_ranking(store, ws, min_labels=MIN_LABELS, wait=True, failed_ids=failed)
    assert reads["confirmed"] == 3 and again is not None and again != first
