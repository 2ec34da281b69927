"""AppTest of the Statistics page on (a copy of) the demo workspace."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from analysis.tables import TABLES
from labeling.store import open_store
from taxonomy import default_taxonomy
from tests.conftest import REPO
from trajectories.workspace import Workspace

PAGE = str(REPO / "app" / "views" / "statistics.py")


@pytest.fixture
def stats_workspace(
    tmp_path: Path, demo_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    ws = Workspace(root)
    failed = ws.query_df("SELECT id FROM trajectories WHERE NOT success ORDER BY id")["id"]
    store = open_store(ws.default_annotations_url)
    store.add_user("ann")
    for i, tid in enumerate(failed[:6]):
        category = ("sql_logic_error", "answer_format_error")[i % 2]
        store.add_label(tid, category, annotator="ann", taxonomy_version=default_taxonomy().version)
        store.add_label(tid, "sql_logic_error", annotator=None, source="llm",
                        taxonomy_version=default_taxonomy().version)
    store.close()
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    monkeypatch.delenv("FAILLAB_DATABASE_URL", raising=False)
    # Settings, workspace and store are process-wide cached resources: start from this one.
    st.cache_resource.clear()
    st.cache_data.clear()
    yield root
    st.cache_resource.clear()
    st.cache_data.clear()


def run_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["identity_name"] = "ann"  # blind mode: ann sees her own labels
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_page_renders_every_tab_with_downloads(stats_workspace: Path) -> None:
    at = run_page()
    assert at.title[0].value == "Statistics"
    assert len(at.tabs) == len(TABLES)
    # Tabs follow the registry; each shows a chart and its table (the last dataframe).
    assert len(at.get("plotly_chart")) == len(TABLES)
    tables = {}
    for name, tab in zip(TABLES, at.tabs, strict=True):
        assert len(tab.get("plotly_chart")) == 1, name
        assert tab.dataframe, name
        tables[name] = tab.dataframe[-1].value
        keys = {b.proto.id.rsplit("-", 1)[-1] for b in tab.get("download_button")}
        assert {f"stats_dl_{name}_csv", f"stats_dl_{name}_tex",
                f"stats_dl_{name}_chart_html"} <= keys, name
    # No kaleido in this environment: the page says why there is no PNG button.
    assert any("kaleido" in c.value for c in at.caption)
    # Labels from the store reach the label tables.
    assert int(tables["taxonomy"]["count"].sum()) == 6
    assert int(tables["labeller"].set_index("category").loc["(overall)", "support"]) == 6
    # The Pass^k tab lists each run's sampling temperature above the chart.
    temps = at.tabs[list(TABLES).index("passk")].dataframe[0].value
    assert list(temps.columns) == ["run", "model", "temperature"]
    assert temps["temperature"].notna().all()


def table_of(at: AppTest, name: str) -> pd.DataFrame:
    return at.tabs[list(TABLES).index(name)].dataframe[-1].value


def test_filters_narrow_the_tables(stats_workspace: Path) -> None:
    at = run_page()
    runs = at.multiselect(key="stats_runs").value
    at.multiselect(key="stats_runs").set_value(runs[:1]).run()
    assert not at.exception
    success = table_of(at, "success")
    assert success["run"].tolist() == runs[:1]
    at.multiselect(key="stats_scopes").set_value(["patient"]).run()
    assert not at.exception
    passk = table_of(at, "passk")
    assert set(passk["scope"]) <= {"all", "patient"}
    at.multiselect(key="stats_intents").set_value([]).run()
    assert not at.exception
    assert any("Pick at least one" in i.value for i in at.info)


def test_passk_slice_and_robustness_grouping(stats_workspace: Path) -> None:
    at = run_page()
    at.selectbox(key="stats_passk_scope").set_value("patient").run()
    assert not at.exception
    at.radio(key="stats_robustness_by").set_value("noise_type").run()
    assert not at.exception


def test_empty_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(tmp_path / "empty"))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = run_page()
    assert any("no trajectories" in i.value for i in at.info)
    st.cache_resource.clear()
