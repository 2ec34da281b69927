"""The Annotate page shows the item the classifier is least sure of first once enough labels
are confirmed (setting rerank_min_labels), and the store's order before."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.queue import failed_frame, queue_for
from labeling.store import Store, open_store
from opinions.learn.trust import machine_routing
from opinions.prelabel.base import PrelabelKey, PrelabelRecord
from opinions.prelabel.heuristic import HeuristicLabeller
from opinions.ranking import classifier_ranking
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace, shown_item
from tests.support import REPO
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")
TAXONOMY = default_taxonomy()
KEYS = ["semantic_misunderstanding", "sql_logic_error", "answer_format_error"]


@pytest.fixture
def env(demo_workspace: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workspace, Store]]:
    root = copy_of(demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    monkeypatch.setenv("FAILLAB_RERANK_MIN_LABELS", "12")
    store = open_store(Settings.from_env().annotations_url())
    store.taxonomies.save(TAXONOMY.version, TAXONOMY.name, TAXONOMY.to_dict())
    store.users.add("ana", "annotator")
    store.users.add("ben", "annotator")
    yield Workspace(root), store
    store.close()
    st.cache_resource.clear()


def _shown(user: str) -> str:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state["identity_name"] = user
    at.run()
    at.switch_page("views/annotate.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return shown_item(at)


def test_annotate_shows_the_least_sure_item_first(env: tuple[Workspace, Store]) -> None:
    ws, store = env
    failed = [str(t) for t in failed_frame(ws)["id"]]
    mine = failed[20:28]
    store.queues.assign(mine, ["ana"], overlap=1)
    plain = queue_for(store, failed, "ana", prelabel_threshold=0.7, spot_check_share=0.1)
    # Too few confirmed labels: the store's order.
    assert _shown("ana") == plain[0]
    for n, tid in enumerate(failed[:12]):
        store.labels.add(tid, KEYS[n % 3], annotator="ben", taxonomy_version=TAXONOMY.version)
    # The page never waits for the features: it starts them in the background and shows the
    # store's order until they are ready.
    ranking = classifier_ranking(store, ws, min_labels=12, wait=True)
    assert ranking is not None
    least_sure = min(mine, key=lambda t: ranking[t])
    assert least_sure != plain[0]  # otherwise the page's order would prove nothing
    assert _shown("ana") == least_sure


def test_an_annotate_run_with_ranking_on_executes_no_finder(
    env: tuple[Workspace, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    import opinions.features as features
    import opinions.prelabel.heuristic as heuristic

    ws, store = env
    failed = [str(t) for t in failed_frame(ws)["id"]]
    labeller = HeuristicLabeller()
    for tid in failed:  # what a heuristic pre-label run stores: the label and its evidence
        traj = ws.get(tid)
        assert traj is not None
        key = PrelabelKey(tid, TAXONOMY.version, labeller.prompt_version, labeller.model)
        store.prelabels.save(PrelabelRecord(key, labeller.label(traj, TAXONOMY.version)))
    store.queues.assign(failed[20:28], ["ana"], overlap=1)
    for n, tid in enumerate(failed[:12]):
        store.labels.add(tid, KEYS[n % 3], annotator="ben", taxonomy_version=TAXONOMY.version)
    runs: list[str] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(threading.current_thread().name)
        raise AssertionError("the finder ran")

    monkeypatch.setattr(heuristic, "find_divergence", counted)
    monkeypatch.setattr(features, "find_divergence", counted)
    _shown("ana")  # ranking on (12 confirmed): the page run starts the features, never waits
    ranking = classifier_ranking(store, ws, min_labels=12, wait=True)
    assert ranking is not None and set(ranking) == set(failed)
    assert runs == []  # neither the page run nor the background: the stored evidence sufficed
    # What routing by measured trust leaves to the heuristic leaves the person's queue (here
    # nothing: no labeller has 30 checked items); the least sure of the rest comes first.
    machine = machine_routing(store, target=0.9, min_checked=30, spot_check_share=0.1)
    waiting = queue_for(store, failed, "ana", prelabel_threshold=0.7, spot_check_share=0.1,
                        left_to_machine=machine.left_to_machine)
    assert waiting
    assert _shown("ana") == min(waiting, key=lambda t: ranking[t])
