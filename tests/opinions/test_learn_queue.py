"""The classifier's ranking of the Annotate queue (opinions.ranking.classifier_ranking) and the
setting that turns it on once enough labels are confirmed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from faillab_core.settings import Settings
from labeling.queue import failed_frame, queue_for
from labeling.store import Store
from opinions.learn.classifier import MIN_LABELS
from opinions.learn.proposals import BackgroundFeatures
from opinions.prelabel.base import PrelabelKey, PrelabelRecord
from opinions.prelabel.heuristic import HeuristicLabeller
from opinions.ranking import classifier_ranking, refit_due
from tests.labeling.support import sqlite_store_with_annotator
from trajectories.workspace import Workspace


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    st = sqlite_store_with_annotator(tmp_path)
    yield st
    st.close()


# The test taxonomy's keys for the causes the demo generator injects.
_KEYS = {"Semantic Misunderstanding": "semantic_misunderstanding",
         "SQL Logic Error": "sql_logic_error", "Stuck-in-Loop": "stuck_in_loop",
         "Answer Format Error": "answer_format_error"}


def _cause(ws: Workspace, tid: str) -> str:
    """The failure the demo generator injected: a stand-in for a person's label."""
    traj = ws.get(tid)
    assert traj is not None
    return _KEYS.get(str((traj.model_extra or {})["simulated_failure"]), "other")


def _confirm(store: Store, ws: Workspace, ids: list[str]) -> None:
    for tid in ids:
        store.labels.add(tid, _cause(ws, tid), annotator="ana", taxonomy_version="v")


def test_setting_default_and_environment() -> None:
    assert Settings.from_env({}).rerank_min_labels == 20  # on once enough labels are confirmed
    assert Settings.from_env({"FAILLAB_RERANK_MIN_LABELS": "0"}).rerank_min_labels == 0


def test_no_ranking_before_enough_confirmed_labels(store: Store, demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    _confirm(store, ws, failed[: MIN_LABELS - 1])
    assert classifier_ranking(store, ws, min_labels=MIN_LABELS) is None
    _confirm(store, ws, failed[MIN_LABELS - 1: MIN_LABELS + 5])
    assert classifier_ranking(store, ws, min_labels=MIN_LABELS + 10) is None  # setting's N
    assert classifier_ranking(store, ws, min_labels=0) is None  # 0: turned off


def test_ranking_orders_the_queue_least_sure_first(store: Store, demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    confirmed, rest = failed[:30], failed[30:]
    _confirm(store, ws, confirmed)
    ranking = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert ranking is not None
    # A proposal for every failure, confirmed ones too: a colleague's label must not move an
    # item to the end of someone else's queue.
    assert set(ranking) == set(failed)
    assert all(0.0 < c <= 1.0 for c in ranking.values())
    assert len(set(ranking.values())) > 1  # it tells items apart

    store.queues.assign(rest, ["ana"], overlap=1)
    plain = queue_for(store, failed, "ana", prelabel_threshold=0.7, spot_check_share=0.0)
    ranked = queue_for(store, failed, "ana", prelabel_threshold=0.7, spot_check_share=0.0,
                       ranking=ranking)
    assert sorted(plain) == sorted(rest)  # no pre-labels: every assigned failure
    assert sorted(ranked) == sorted(plain)  # the same items, only reordered
    confidences = [ranking[t] for t in ranked]
    assert confidences == sorted(confidences)
    # The same labels give the same answer (cached), a new confirmed label a new one.
    assert classifier_ranking(store, ws, min_labels=20) == ranking
    # Newly confirmed labels refit the classifier: the confidences change.
    _confirm(store, ws, rest[:10])
    again = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert again is not None and set(again) == set(failed) and again != ranking


def test_a_fit_stands_until_the_confirmed_labels_change_by_a_share(
    store: Store, demo_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's every key changes the confirmed labels; refitting on each was half of a label's
    server time. A fit stands until a tenth of the labels it learned from changed."""
    import opinions.learn.proposals as proposals_module

    fits: list[int] = []
    real = proposals_module.proposals

    def counted(features: Any, confirmed: Any) -> Any:
        fits.append(len(confirmed))
        return real(features, confirmed)

    monkeypatch.setattr(proposals_module, "proposals", counted)
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    _confirm(store, ws, failed[:30])
    first = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert first is not None and fits == [30]
    _confirm(store, ws, failed[30:32])  # 2 of 30 changed: under a tenth
    assert classifier_ranking(store, ws, min_labels=20, wait=True) == first
    assert fits == [30]
    _confirm(store, ws, failed[32:33])  # 3 of 30: a tenth, so the classifier learns them
    again = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert fits == [30, 33] and again is not None and again != first
    # A changed category counts like a new label; an undo (a label no longer confirmed) too.
    for tid in failed[:4]:
        store.labels.retract_latest(tid, annotator="ana")
    classifier_ranking(store, ws, min_labels=20, wait=True)
    assert fits == [30, 33, 29]


def test_a_key_never_waits_for_a_refit(
    store: Store, demo_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A due refit runs beside the page: the key's run gets the last ranking at once, and the
    next run after the fit the new one."""
    import opinions.learn.proposals as proposals_module
    import opinions.ranking as queue_module

    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    _confirm(store, ws, failed[:30])
    first = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert first is not None
    release = threading.Event()
    real = proposals_module.proposals

    def slow(features: Any, confirmed: Any) -> Any:
        assert release.wait(60)
        return real(features, confirmed)

    monkeypatch.setattr(proposals_module, "proposals", slow)
    monkeypatch.setattr(queue_module, "REFIT_INTERVAL_S", 0.0)  # a refit is due at once
    _confirm(store, ws, failed[30:40])
    assert classifier_ranking(store, ws, min_labels=20) == first  # the fit is still running
    [fitting] = [t for t in queue_module._FITTING.values() if t.is_alive()]
    release.set()
    fitting.join(60)
    again = classifier_ranking(store, ws, min_labels=20)
    assert again is not None and again != first and set(again) == set(first)


def test_a_fit_stands_for_the_refit_interval_however_many_labels_change(
    store: Store, demo_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a team, a tenth of the labels changed every few seconds and each refit took the
    interpreter from the keys beside it: a page keeps a fit for `REFIT_INTERVAL_S` after it
    began, then refits as soon as the share has changed."""
    import opinions.learn.proposals as proposals_module
    import opinions.ranking as queue_module

    fits: list[int] = []
    real = proposals_module.proposals

    def counted(features: Any, confirmed: Any) -> Any:
        fits.append(len(confirmed))
        return real(features, confirmed)

    monkeypatch.setattr(proposals_module, "proposals", counted)
    clock = [1000.0]
    monkeypatch.setattr(queue_module.time, "monotonic", lambda: clock[0])
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    _confirm(store, ws, failed[:30])
    first = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert first is not None and fits == [30]
    _confirm(store, ws, failed[30:45])  # half as many again: far past a tenth
    clock[0] += queue_module.REFIT_INTERVAL_S - 1
    assert classifier_ranking(store, ws, min_labels=20) == first
    for thread in list(queue_module._FITTING.values()):
        thread.join(60)
    assert fits == [30]  # inside the interval: no fit started
    clock[0] += 2
    classifier_ranking(store, ws, min_labels=20)  # past it: the due refit starts
    for thread in list(queue_module._FITTING.values()):
        thread.join(60)
    assert fits == [30, 45]


def test_refit_due_counts_new_changed_and_gone_labels() -> None:
    fitted = {f"t{i}": "a" for i in range(20)}
    assert not refit_due(fitted, fitted)
    assert not refit_due(fitted, {**fitted, "t0": "b"})  # 1 of 20 changed
    assert refit_due(fitted, {**fitted, "t0": "b", "new": "a"})  # 2 of 20: a tenth
    gone = dict(fitted)
    del gone["t0"], gone["t1"]
    assert refit_due(fitted, gone)
    assert refit_due({}, {"t0": "a"})  # never fitted: any label


def _count_finder_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every finder run from now on, by the name of the thread it ran in."""
    import opinions.features as features
    import opinions.prelabel.heuristic as heuristic

    threads: list[str] = []
    real = heuristic.find_divergence

    def counted(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(heuristic, "find_divergence", counted)
    monkeypatch.setattr(features, "find_divergence", counted)
    return threads


def _store_prelabels(store: Store, ws: Workspace, ids: list[str]) -> None:
    """What a heuristic pre-label run leaves: each label with its evidence beside it."""
    labeller = HeuristicLabeller()
    for tid in ids:
        traj = ws.get(tid)
        assert traj is not None
        result = labeller.label(traj, labeller.taxonomy.version)
        key = PrelabelKey(tid, labeller.taxonomy.version, labeller.prompt_version, labeller.model)
        store.prelabels.save(PrelabelRecord(key, result))


def test_ranking_reads_stored_evidence_and_runs_no_finder(
    store: Store, demo_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    _store_prelabels(store, ws, failed)
    _confirm(store, ws, failed[:25])
    runs = _count_finder_runs(monkeypatch)
    ranking = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert ranking is not None and set(ranking) == set(failed)
    assert runs == []  # every failure had stored evidence


def test_missing_features_are_computed_outside_the_caller(
    store: Store, demo_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(demo_workspace)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    _store_prelabels(store, ws, failed[:5])  # a new pre-label count: new features to compute
    _confirm(store, ws, failed[:25])
    runs = _count_finder_runs(monkeypatch)
    first = classifier_ranking(store, ws, min_labels=20)  # does not wait for the features
    ranking = classifier_ranking(store, ws, min_labels=20, wait=True)
    assert ranking is not None and set(ranking) == set(failed)
    assert first in (None, ranking)
    # The finder ran for the failures without stored evidence, in the background thread only.
    assert runs and set(runs) == {BackgroundFeatures.THREAD_NAME}
