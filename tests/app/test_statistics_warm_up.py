"""The server computes what a first Statistics visit shows in the background at its first page
run (faillab.app.state), so that visit finds its tables in the cache."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import faillab.app.widgets.stats_data as stats_data
from tests.app.support import copy_of, serve_workspace
from tests.support import REPO

MAIN = str(REPO / "app" / "main.py")


@pytest.fixture
def fresh_workspace(tmp_path: Path, demo_workspace: Path,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = copy_of(demo_workspace, tmp_path)  # a root this process has not warmed yet
    serve_workspace(root, monkeypatch)
    yield root
    st.cache_data.clear()
    st.cache_resource.clear()


def _count_table_computations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = stats_data.compute_all

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(stats_data, "compute_all", counted)
    return calls


def test_the_first_statistics_visit_finds_its_tables_computed(
    fresh_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()  # the server's first page (the overview) starts the warm-up
    assert not at.exception
    warm_ups = [t for t in threading.enumerate() if t.name == "faillab-statistics-warm-up"]
    assert warm_ups, "no warm-up started"
    for thread in warm_ups:
        thread.join(timeout=120)
    # The warm-up only reads: a workspace nobody has labelled keeps having no store file.
    assert not (fresh_workspace / "annotations.sqlite").exists()
    calls = _count_table_computations(monkeypatch)
    at.switch_page("views/statistics.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert calls == []  # the visit read what the warm-up computed
    assert any(" trajectories · runs: " in c.value for c in at.caption)

    # Without the warm-up's results the same visit computes them itself.
    st.cache_data.clear()
    at.run()
    assert not at.exception
    assert calls == [1]


def test_the_first_clusters_visit_finds_the_clusters_built(
    fresh_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faillab.app.widgets.clusters_data as clusters_data

    at = AppTest.from_file(MAIN, default_timeout=60)
    at.session_state["identity_name"] = "lea"
    at.run()
    assert not at.exception
    for thread in [t for t in threading.enumerate() if t.name == "faillab-statistics-warm-up"]:
        thread.join(timeout=180)
    builds: list[int] = []
    real = clusters_data.build_clusters

    def counted(*args: Any, **kwargs: Any) -> Any:
        builds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(clusters_data, "build_clusters", counted)
    at.switch_page("views/clusters.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="clusters_pick").options  # the page shows clusters ...
    assert builds == []  # ... that the warm-up built


def test_a_large_workspace_is_not_clustered_before_anyone_asks(
    fresh_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faillab.app.widgets.clusters_data as clusters_data
    from trajectories.workspace import Workspace

    monkeypatch.setattr(clusters_data, "WARM_UP_LIMIT", 10)
    builds: list[int] = []
    monkeypatch.setattr(clusters_data, "build_clusters",
                        lambda *a, **k: builds.append(1))
    clusters_data.warm_cluster_view(Workspace(fresh_workspace), "sqlite:///:memory:")
    assert builds == []
