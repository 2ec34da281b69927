"""AppTest of the Statistics page on (a copy of) the demo workspace."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from analysis.quick_charts import CHART_CLASS, TABLE_CLASS
from analysis.tables import TABLES
from labeling.store import open_store
from taxonomy import default_taxonomy
from tests.support import REPO, make_trajectory
from trajectories.model import Run, Task
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
    store.users.add("ann")
    for i, tid in enumerate(failed[:6]):
        category = ("sql_logic_error", "answer_format_error")[i % 2]
        store.labels.add(tid, category, annotator="ann",
                         taxonomy_version=default_taxonomy().version)
        store.labels.add(tid, "sql_logic_error", annotator=None, source="llm",
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


def open_tab(at: AppTest, name: str) -> Any:
    """Open the tab of table `name` (only the open tab is built) and return it."""
    index = list(TABLES).index(name)
    if at.session_state["stats_tab"] != at.tabs[index].label:
        at.session_state["stats_tab"] = at.tabs[index].label
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at.tabs[index]


def quick_charts(at: AppTest, tab: Any) -> list[str]:
    """The light HTML charts in `tab` (the page draws these instead of plotly by default)."""
    return [h.proto.body for h in tab.get("html") if CHART_CLASS in h.proto.body]


def test_page_renders_every_tab_with_downloads(stats_workspace: Path) -> None:
    at = run_page()
    assert at.title[0].value == "Statistics"
    assert len(at.tabs) == len(TABLES)
    # The first screen draws no plotly chart (its scripts are most of a first visit): only
    # the open tab's light HTML chart.
    assert not at.get("plotly_chart")
    assert len(quick_charts(at, at.tabs[0])) == 1
    assert 'data-chart="success"' in quick_charts(at, at.tabs[0])[0]
    # Tabs follow the registry; each shows its light chart and its table as HTML, and draws
    # the plotly chart and the data grid only when asked.
    tables = {}
    for name in TABLES:
        tab = open_tab(at, name)
        assert not at.get("plotly_chart"), name
        charts = quick_charts(at, tab)
        assert len(charts) == 1 and f'data-chart="{name}"' in charts[0], name
        at.toggle(key=f"stats_chart_{name}_interactive").set_value(True).run()
        assert not at.exception, [e.value for e in at.exception]
        tab = at.tabs[list(TABLES).index(name)]
        assert len(at.get("plotly_chart")) == 1, name
        assert len(tab.get("plotly_chart")) == 1, name
        at.toggle(key=f"stats_chart_{name}_interactive").set_value(False).run()
        assert not at.get("plotly_chart"), name
        assert any(TABLE_CLASS in h.proto.body for h in tab.get("html")), name
        assert not [d for d in tab.dataframe if d.proto.id.endswith(f"stats_table_{name}")]
        tables[name] = table_of(at, name)
        keys = {b.proto.id.rsplit("-", 1)[-1] for b in tab.get("download_button")}
        assert {f"stats_dl_{name}_csv", f"stats_dl_{name}_tex",
                f"stats_dl_{name}_chart_html", f"stats_dl_{name}_chart_png"} <= keys, name
        # kaleido is a dependency: every chart has a PNG button and no excuse caption.
        assert not any("kaleido" in c.value for c in at.caption)
    bundle = {b.proto.id.rsplit("-", 1)[-1] for b in at.get("download_button")}
    assert "stats_dl_bundle" in bundle
    # Labels from the store reach the label tables.
    assert int(tables["taxonomy"]["count"].sum()) == 6
    assert int(cast(int, tables["labeller"].set_index("category").loc["(overall)", "support"])) == 6
    # The Pass^k tab lists each run's sampling temperature above the chart.
    temps = Workspace(stats_workspace).query_df(
        "SELECT run, any_value(model) AS model, any_value(temperature) AS t FROM trajectories "
        "GROUP BY run")
    shown = next(h.proto.body for h in open_tab(at, "passk").get("html")
             if TABLE_CLASS in h.proto.body)
    assert ">run<" in shown and ">model<" in shown and ">temperature<" in shown
    for row in temps.itertuples():
        assert f">{row.run}<" in shown and f">{row.t:.2f}<" in shown
    assert "unknown" not in shown


def table_of(at: AppTest, name: str) -> pd.DataFrame:
    """The tab's table, read from its data grid (the "Interactive table" toggle turned on)."""
    open_tab(at, name)
    toggle = at.toggle(key=f"stats_table_{name}_interactive")
    if not toggle.value:
        toggle.set_value(True).run()
        assert not at.exception, [e.value for e in at.exception]
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
    open_tab(at, "passk")
    at.selectbox(key="stats_passk_scope").set_value("patient").run()
    assert not at.exception
    open_tab(at, "robustness")
    at.radio(key="stats_robustness_by").set_value("noise_type").run()
    assert not at.exception


def test_empty_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(tmp_path / "empty"))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = run_page()
    assert any("no trajectories" in i.value for i in at.info)
    st.cache_resource.clear()


def _add_unscored(root: Path) -> None:
    """One trajectory of a test split: no ground truth and no recorded outcome."""
    from tests.support import make_trajectory
    from trajectories.model import Run, Task

    task = Task(id="no-truth-1", question="How many admissions?", intent="Demographics",
                scope="population", has_ground_truth=False)
    run = Run(name="sim-small/t0.0", model="sim-small", temperature=0.0, rollout=0)
    Workspace(root).add([(make_trajectory(task=task, run=run, final_answer=None).with_id(),
                          None)])


def test_success_source_choice_and_outcome_note(stats_workspace: Path) -> None:
    _add_unscored(stats_workspace)
    ws = Workspace(stats_workspace)
    differ = int(ws.query_df(
        "SELECT count(*) AS n FROM trajectories WHERE recorded_success IS NOT NULL "
        "AND exact_match IS NOT NULL AND recorded_success <> exact_match")["n"].iloc[0])
    assert differ > 0  # the demo's producer scores some answers differently
    at = run_page()
    assert at.radio(key="stats_success_source").value == "verdict"
    notes = [c.value for c in at.caption if c.value.startswith("Success source:")]
    assert len(notes) == 1
    assert notes[0].startswith("Success source: verdict (the default, as in `faillab stats`): "
                               "people's verdicts, else the producer's recorded verdict")
    assert f"disagree on {differ:,} of these trajectories" in notes[0]
    # The unscored one added above, and what the judge leaves to a person (close answers).
    left_out = int(ws.query_df("SELECT count(*) AS n FROM trajectories WHERE success IS NULL")
                   ["n"].iloc[0])
    assert left_out >= 1
    assert f"{left_out} are unscored or undecided" in notes[0]

    def overall(source_sql: str) -> dict[str, float]:
        rates = ws.query_df(
            f"SELECT run, avg(CAST({source_sql} AS DOUBLE)) AS rate FROM trajectories "
            f"WHERE {source_sql} IS NOT NULL GROUP BY run")
        return dict(zip(rates["run"], rates["rate"], strict=True))

    def shown() -> dict[str, float]:
        table = table_of(at, "success")
        return dict(zip(table["run"], table["overall"], strict=True))

    verdict = overall("coalesce(recorded_success, judged_success)")
    recorded = overall("coalesce(recorded_success, exact_match)")
    exact = overall("coalesce(exact_match, recorded_success)")
    assert recorded != exact
    assert shown() == pytest.approx(verdict)
    at.radio(key="stats_success_source").set_value("recorded").run()
    assert shown() == pytest.approx(recorded)
    at.radio(key="stats_success_source").set_value("exact_match").run()
    assert not at.exception
    assert shown() == pytest.approx(exact)
    assert any(c.value.startswith("Success source: exact_match (default: verdict, as in")
               for c in at.caption)


def test_passk_paper_layout_is_a_view_of_the_runs(stats_workspace: Path) -> None:
    at = run_page()
    long = table_of(at, "passk")
    assert "pass_hat_run" not in long.columns
    at.radio(key="stats_passk_layout").set_value("paper").run()
    assert not at.exception
    paper = table_of(at, "passk")
    ws = Workspace(stats_workspace)
    # Pass^1 is the mean over tasks of each task's share of rollouts that succeeded, among
    # those with an outcome (an undecided rollout is unknown, not a failure).
    rates = ws.query_df("SELECT run, avg(rate) AS rate FROM (SELECT run, task_id, "
                        "avg(CAST(success AS DOUBLE)) AS rate FROM trajectories "
                        "WHERE success IS NOT NULL GROUP BY run, task_id) GROUP BY run")
    rate = dict(zip(rates["run"], rates["rate"], strict=True))
    overall = paper[(paper["scope"] == "all") & (paper["intent"] == "all")]
    assert len(overall) == ws.query_df("SELECT DISTINCT model FROM trajectories").shape[0]
    for row in overall.itertuples():
        # One row per model: Pass^1 of its T=0 run beside Pass@1 of its T=0.6 run, and
        # Pass^1 = Pass@1 = the run's success rate over its tasks.
        assert row.pass_hat_run == f"{row.model}/t0.0"
        assert row.pass_at_run == f"{row.model}/t0.6"
        assert row.pass_hat_1 == pytest.approx(rate[row.pass_hat_run])
        assert row.pass_at_1 == pytest.approx(rate[row.pass_at_run])
    assert any("Tables 22-26" in c.value and "T=0.6" in c.value for c in at.caption)


def test_sr_definition_choice_is_named(stats_workspace: Path) -> None:
    at = run_page()
    tab = open_tab(at, "turn_budget")
    assert at.radio(key="stats_sr_definition").value == "common_solved"
    assert any("SR(T) definition: common_solved, the paper's" in c.value for c in tab.caption)
    assert set(table_of(at, "turn_budget")["definition"]) == {"common_solved"}
    at.radio(key="stats_sr_definition").set_value("all_trajectories").run()
    assert not at.exception
    tab = at.tabs[list(TABLES).index("turn_budget")]
    assert any("SR(T) definition: all_trajectories" in c.value for c in tab.caption)
    table = table_of(at, "turn_budget")
    assert set(table["definition"]) == {"all_trajectories"}
    sizes = Workspace(stats_workspace).query_df(
        "SELECT run, count(*) AS n FROM trajectories WHERE success IS NOT NULL GROUP BY run")
    expected = dict(zip(sizes["run"], sizes["n"], strict=True))
    assert {r: int(n) for r, n in zip(table["run"], table["n"], strict=True)} == expected


def test_label_tables_say_which_labels_they_count(stats_workspace: Path) -> None:
    at = run_page()
    assert any("final labels counted (labels: human-confirmed only (the default))" in c.value
               for c in at.caption)
    for name in ("taxonomy", "taxonomy_turns"):
        tab = open_tab(at, name)
        assert any("Labels: human-confirmed only (the default)" in c.value
                   for c in tab.caption), name
        # The chart itself says it too, so a screenshot of it cannot mislead.
        assert "Labels: human-confirmed only (the default)" in quick_charts(at, tab)[0], name
    tab = open_tab(at, "provenance")
    assert any("LLM-only pre-labels" in c.value for c in tab.caption)
    assert "every final label by source" in quick_charts(at, tab)[0]
    tab = open_tab(at, "labeller")
    assert any("human-derived final label" in c.value for c in tab.caption)
    assert "human-derived final labels (LLM-only left out)" in quick_charts(at, tab)[0]


def test_provenance_filter_counts_llm_only_labels_only_when_asked(stats_workspace: Path) -> None:
    ws = Workspace(stats_workspace)
    failed = ws.query_df("SELECT id FROM trajectories WHERE NOT success ORDER BY id")["id"]
    store = open_store(ws.default_annotations_url)
    for tid in failed[6:9]:  # three items nobody reviewed
        store.labels.add(tid, "stuck_in_loop", annotator=None, source="llm",
                        taxonomy_version=default_taxonomy().version)
    store.close()
    at = run_page()
    taxonomy_tab = list(TABLES).index("taxonomy")
    table_of(at, "taxonomy")

    def counted() -> int:
        frames = [d.value for d in at.tabs[taxonomy_tab].dataframe]
        return int(sum(int(f["count"].sum()) for f in frames if "count" in f))

    assert counted() == 6  # the default: human-confirmed only
    at.radio(key="stats_label_scope").set_value("include LLM-only").run()
    assert not at.exception
    assert counted() == 9
    assert any("Labels: include LLM-only (default: human-confirmed only)" in c.value
               for c in at.tabs[taxonomy_tab].caption)
    assert "Labels: include LLM-only (default: human-confirmed only)" in \
        quick_charts(at, at.tabs[taxonomy_tab])[0]
    # The provenance table shows every source whatever is counted.
    provenance = table_of(at, "provenance")
    assert "llm_only" in set(provenance["provenance"].astype(str))


def test_the_shared_trajectory_frame_is_never_written(
        stats_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every session reads one cached frame (no copy per run): a visit that filters, switches
    the labels counted and opens every tab must leave it as it was."""
    import analysis.sources
    from faillab.app.state import trajectory_frame

    loads: list[str] = []
    real_load = analysis.sources.load_frame

    def counted_load(*args: Any, **kwargs: Any) -> pd.DataFrame:
        loads.append(str(kwargs.get("success_source")))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(analysis.sources, "load_frame", counted_load)
    ws = Workspace(stats_workspace)
    at = run_page()
    shared = trajectory_frame("verdict", ws)
    assert loads == ["verdict"]  # the page's own cached frame, loaded once
    before = (list(shared.columns), len(shared),
              int(pd.util.hash_pandas_object(shared.astype(str), index=True).sum()))
    runs = at.multiselect(key="stats_runs").value
    at.multiselect(key="stats_runs").set_value(runs[:1]).run()
    at.multiselect(key="stats_scopes").set_value(["patient"]).run()
    for name in TABLES:
        open_tab(at, name)
    at.radio(key="stats_label_scope").set_value("include LLM-only").run()
    assert not at.exception, [e.value for e in at.exception]
    assert trajectory_frame("verdict", ws) is shared  # the same object, not a copy
    assert loads == ["verdict"]
    after = (list(shared.columns), len(shared),
             int(pd.util.hash_pandas_object(shared.astype(str), index=True).sum()))
    assert after == before


def test_empty_turns_tables_say_which_run_solved_nothing(stats_workspace: Path) -> None:
    # A short run that solved nothing (as real logs have) empties the commonly solved tasks.
    task = Task(id="zero-1", question="How many admissions?", intent="Demographics",
                scope="population", ground_truth=[["1"]], reference_sql="SELECT 1")
    Workspace(stats_workspace).add([(make_trajectory(
        task=task, run=Run(name="zerorun", model="m0", temperature=0.0, rollout=0),
        final_answer="2").with_id(), None)])
    st.cache_data.clear()
    st.cache_resource.clear()
    at = run_page()
    runs = at.multiselect(key="stats_runs").value
    assert "zerorun" in runs
    at.multiselect(key="stats_runs").set_value([runs[0], "zerorun"]).run()
    notes = {}
    for name in ("turns", "turn_budget"):
        tab = open_tab(at, name)
        notes[name] = [i.value for i in tab.info]
    assert notes["turns"] == [
        "No task was solved by every selected run: 1 of the 2 selected runs solved no task "
        "(zerorun). This table compares runs on the tasks all of them solved (EHR-Complex "
        "Fig. 5); take runs out under Filters."]
    assert notes["turn_budget"][0].endswith(
        "under Filters or choose the all_trajectories definition above.")
    # SR(T) over every trajectory is not on the common tasks: no such note there.
    at.radio(key="stats_sr_definition").set_value("all_trajectories").run()
    assert not at.exception
    assert not [i for i in open_tab(at, "turn_budget").info if "every selected run" in i.value]
    # One click takes the run that solved nothing out: the tables have rows again, the note
    # is gone, and the Filters' run selection says so.
    open_tab(at, "turns")
    at.button(key="stats_leave_out_turns").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="stats_runs").value == [runs[0]]
    assert not [i for i in open_tab(at, "turns").info if "every selected run" in i.value]
    assert not table_of(at, "turns").empty
