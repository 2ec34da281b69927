"""analysis.sources: loading the trajectory frame and labels, and running the table registry."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from analysis.failures import category_display_name
from analysis.sources import (
    STATS_COLUMNS,
    Inputs,
    SourceError,
    chart_for,
    check_runs,
    compute_all,
    compute_table,
    filter_frame,
    labeller_pairs,
    load_frame,
    load_inputs,
    run_names,
    run_temperatures,
)
from analysis.tables import TABLES, TableOptions
from labeling.store import Store, open_store
from taxonomy.model import default_taxonomy
from tests.support import make_trajectory
from trajectories.workspace import Workspace

TAXONOMY = default_taxonomy().version


def label_workspace(root: Path) -> tuple[Store, dict[str, str]]:
    """Human and LLM labels on a few failed trajectories of a workspace copy.

    Returns the open store and the expected final category per labelled trajectory.
    """
    ws = Workspace(root)
    failed = ws.query_df(
        "SELECT id FROM trajectories WHERE NOT success ORDER BY run, task_id, rollout, id"
    )["id"].tolist()
    store = open_store(ws.default_annotations_url)
    store.users.add("ann1")
    store.users.add("ann2")
    expected: dict[str, str] = {}
    cats = ["sql_logic_error", "semantic_misunderstanding", "answer_format_error"]
    for i, tid in enumerate(failed[:9]):
        cat = cats[i % 3]
        store.labels.add(tid, cat, annotator="ann1", taxonomy_version=TAXONOMY)
        if i % 2 == 0:
            store.labels.add(tid, cat, annotator="ann2", taxonomy_version=TAXONOMY)
        # The LLM agrees on even items and says "sql_logic_error" on odd ones.
        llm = cat if i % 2 == 0 else "sql_logic_error"
        store.labels.add(tid, llm, annotator=None, source="llm", taxonomy_version=TAXONOMY,
                         confidence=0.9)
        expected[tid] = cat
    # An LLM-only item and a disputed item (humans disagree, no adjudication).
    store.labels.add(failed[9], "stuck_in_loop", annotator=None, source="llm",
                     taxonomy_version=TAXONOMY)
    expected[failed[9]] = "stuck_in_loop"
    store.labels.add(failed[10], "sql_logic_error", annotator="ann1", taxonomy_version=TAXONOMY)
    store.labels.add(failed[10], "stuck_in_loop", annotator="ann2", taxonomy_version=TAXONOMY)
    return store, expected


@pytest.fixture
def labelled(tmp_path: Path, demo_workspace: Path) -> tuple[Workspace, Store, dict[str, str]]:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    store, expected = label_workspace(root)
    return Workspace(root), store, expected


def test_load_frame_columns_and_rows(demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    df = load_frame(ws)
    assert list(df.columns) == list(STATS_COLUMNS)
    assert len(df) == ws.summary()["trajectories"]
    # Same rows and outcomes as the full trajectory view.
    full = ws.frame().set_index("id").sort_index()
    assert df.set_index("id").sort_index()["success"].equals(full["success"])


def test_load_frame_runs_filter(demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    runs = run_names(ws)
    assert len(runs) >= 2
    df = load_frame(ws, runs[:2])
    assert set(df["run"]) == set(runs[:2])
    assert len(df) == int(load_frame(ws)["run"].isin(runs[:2]).sum())
    assert load_frame(ws, []).empty


def test_check_runs(demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    check_runs(ws, run_names(ws)[:1])
    with pytest.raises(SourceError, match="unknown run"):
        check_runs(ws, ["no-such-run"])


def test_signature_changes_when_data_is_added(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws").create()
    empty = ws.signature()
    ws.add([(make_trajectory(), "x")])
    first = ws.signature()
    assert first != empty
    assert ws.signature() == first  # stable while nothing changes
    ws.add([(make_trajectory(final_answer=7), "y")])
    second = ws.signature()
    assert second != first
    ws.write_scores()
    assert ws.signature() != second  # a re-score rewrites the overlay


def test_filter_frame_uses_table_labels() -> None:
    df = pd.DataFrame(
        {"intent": ["Labs", None, "Cost"], "scope": ["patient", "population", None]}
    )
    assert len(filter_frame(df)) == 3
    assert filter_frame(df, intents=["Other"]).index.tolist() == [1]
    assert filter_frame(df, scopes=["unscoped"]).index.tolist() == [2]
    assert filter_frame(df, intents=["Labs", "Cost"], scopes=["patient"]).index.tolist() == [0]


def test_run_temperatures(demo_workspace: Path) -> None:
    df = load_frame(Workspace(demo_workspace))
    temps = run_temperatures(df)
    assert list(temps.columns) == ["run", "model", "temperature"]
    assert set(temps["run"]) == set(df["run"])
    assert temps["temperature"].notna().all()


def test_final_labels_feed_taxonomy(labelled: tuple[Workspace, Store, dict[str, str]]) -> None:
    ws, store, expected = labelled
    inputs = load_inputs(ws, store)
    assert inputs.labels is not None
    dist = compute_table("taxonomy", inputs, options=TableOptions(label_policy="all"))
    counts = dist.groupby("category")["count"].sum().to_dict()
    # Tables show the categories by display name, not by stored key.
    want = pd.Series(expected).map(category_display_name).value_counts().to_dict()
    assert {k: v for k, v in counts.items() if v} == want
    # The default policy (as on the page and in the CLI) leaves LLM-only labels out.
    confirmed = inputs.labels[inputs.labels["provenance"] != "llm_only"]
    default = compute_table("taxonomy", inputs).groupby("category")["count"].sum()
    assert int(default.sum()) == int(confirmed["category"].notna().sum()) < sum(want.values())
    prov = compute_table("provenance", inputs).set_index("provenance")["count"].to_dict()
    assert prov["human_agreed"] == 5 and prov["human_single"] == 4 and prov["llm_only"] == 1
    assert prov["disputed"] == 1


def test_labeller_pairs_and_agreement(
    labelled: tuple[Workspace, Store, dict[str, str]],
) -> None:
    ws, store, _ = labelled
    pairs = labeller_pairs(store)
    # Only human-verdict items that the LLM also labelled: 9 (not the LLM-only or disputed).
    assert len(pairs) == 9
    assert set(pairs["human_provenance"]) == {"human_agreed", "human_single"}
    table = compute_table("labeller", load_inputs(ws, store))
    overall = table[table["category"] == "(overall)"].iloc[0]
    agree = int((pairs["llm_category"] == pairs["human_category"]).sum())
    assert overall["support"] == 9
    assert overall["override_rate"] == pytest.approx(1 - agree / 9)
    assert {"kappa", "precision", "recall"} <= set(table.columns)


def test_agreement_page_and_statistics_compute_llm_vs_human_once(
    labelled: tuple[Workspace, Store, dict[str, str]],
) -> None:
    from analysis.labeller import llm_vs_human

    ws, store, _ = labelled
    statistics = compute_table("labeller", load_inputs(ws, store)).set_index("category")
    agreement = llm_vs_human(labeller_pairs(store))["all"].set_index("category")
    overall = "(overall)"
    for column in ("support", "precision", "kappa", "override_rate"):
        assert statistics.loc[overall, column] == pytest.approx(agreement.loc[overall, column],
                                                                nan_ok=True), column


def test_labeller_pairs_empty_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'a.sqlite'}")
    pairs = labeller_pairs(store)
    assert pairs.empty and "llm_category" in pairs.columns


def test_compute_all_matches_registry(demo_workspace: Path) -> None:
    inputs = load_inputs(Workspace(demo_workspace))
    out = compute_all(inputs)
    assert list(out) == list(TABLES)
    for name, table in out.items():
        pd.testing.assert_frame_equal(table, compute_table(name, inputs))
    with pytest.raises(SourceError):
        compute_table("nope", inputs)


def test_every_table_has_a_chart(labelled: tuple[Workspace, Store, dict[str, str]]) -> None:
    ws, store, _ = labelled
    tables = compute_all(load_inputs(ws, store))
    for name, table in tables.items():
        assert isinstance(chart_for(name, table), go.Figure), name
    # Empty tables still give a (placeholder) figure.
    empty = compute_all(Inputs(load_frame(ws).iloc[0:0]))
    for name, table in empty.items():
        assert isinstance(chart_for(name, table), go.Figure), name


def test_passk_legend_shows_temperature(demo_workspace: Path) -> None:
    inputs = load_inputs(Workspace(demo_workspace))
    fig = chart_for("passk", compute_table("passk", inputs))
    names = {t.name for t in fig.data}
    assert names and all("(T=" in str(n) for n in names)
