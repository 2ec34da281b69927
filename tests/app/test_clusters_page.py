"""Clusters page in-process (AppTest): one decision labels a cluster's core, outliers on request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.store import Store, open_store
from opinions.clusters import build_clusters, default_embedder, workspace_failures
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace
from tests.support import REAL_TRAJECTORIES, REPO, require_shared
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real logs, imported once for the module; each test gets a copy (they label)."""
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))[:2]
    root = tmp_path_factory.mktemp("clusters-page") / "ws"
    Workspace(root).import_files(files)
    return root


@pytest.fixture
def env(imported: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workspace, Store]]:
    ws = Workspace(copy_of(imported, tmp_path))
    serve_workspace(ws.root, monkeypatch)
    store = open_store(Settings.from_env().annotations_url())
    store.users.add("ana", "annotator")
    store.users.add("lea", "lead")
    yield ws, store
    store.close()
    st.cache_resource.clear()


def test_cluster_decision_from_the_page(env: tuple[Workspace, Store]) -> None:
    ws, store = env
    view = build_clusters(workspace_failures(ws), default_embedder("tfidf"))
    groups = [c for c in view.clusters if len(c.members) > 1]
    assert groups, "the two files hold look-alike failures"
    first = groups[0]

    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state["identity_name"] = "lea"
    at.run()
    at.switch_page("views/clusters.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="clusters_pick").set_value(0)
    # Nothing is chosen for the lead: submitting without a category labels nothing.
    assert at.selectbox(key=f"clusters_cat_{first.cluster_id}").value is None
    at.button[0].click()
    at.run()
    assert [e.value for e in at.error] == [
        "Choose a category for the cluster first; nothing was labelled."]
    assert all(store.labels.for_item(t, viewer="lea") == [] for t in first.members)
    # The suggestions are named as the taxonomy names them, and said to be no person's.
    shown = at.dataframe[0].value
    names = {c.key: c.name for c in default_taxonomy().categories}
    assert set(shown["suggested"]) - {"—"} <= set(names.values())
    assert any(c.value.startswith("Suggested by the evidence finder") for c in at.caption)
    at.selectbox(key=f"clusters_cat_{first.cluster_id}").set_value("sql_logic_error")
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    for tid in first.core:
        (label,) = store.labels.for_item(tid, viewer="lea")
        assert label.category == "sql_logic_error" and label.source == "human"
        assert label.annotator == "lea" and label.note is not None
        assert label.note.startswith("cluster decision")
    for tid in first.outliers:
        assert store.labels.for_item(tid, viewer="lea") == []
    outside = set(view.items) - set(first.members)
    assert all(store.labels.for_item(t, viewer="lea") == [] for t in outside)


def test_an_annotator_cannot_decide_a_cluster_of_items_not_theirs(
        env: tuple[Workspace, Store]) -> None:
    ws, store = env
    view = build_clusters(workspace_failures(ws), default_embedder("tfidf"))
    first = next(c for c in view.clusters if len(c.members) > 1)
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state["identity_name"] = "ana"
    at.run()
    at.switch_page("views/clusters.py")
    at.run()
    at.selectbox(key="clusters_pick").set_value(0)
    at.selectbox(key=f"clusters_cat_{first.cluster_id}").set_value("sql_logic_error")
    at.button[0].click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("is a lead's: " in e.value and "not assigned" in e.value for e in at.error)
    assert all(store.labels.for_item(t, viewer="lea") == [] for t in first.members)
