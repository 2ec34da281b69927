"""Table registry, chart builders and the labeller table on a small synthetic workspace."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from analysis import charts
from analysis.labeller import labeller_agreement
from analysis.tables import STATISTICS, TABLES, TableOptions, all_tables

# The benchmark's synthetic workspace doubles as a realistic fixture; load it by path because
# bench/ is not a package.
_spec = importlib.util.spec_from_file_location(
    "bench_stats", Path(__file__).resolve().parents[2] / "bench" / "bench_stats.py"
)
assert _spec is not None and _spec.loader is not None
_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench)
synthetic_frame = _bench.synthetic_frame
synthetic_labels = _bench.synthetic_labels


@pytest.fixture(scope="module")
def workspace() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    df = synthetic_frame(n_runs=3, n_tasks=120, n_rollouts=4, seed=3)
    labels, pairs = synthetic_labels(df, seed=4)
    return df, labels, pairs


def test_registry_has_required_tables() -> None:
    assert {"success", "passk", "turns", "taxonomy", "robustness", "labeller"} <= set(TABLES)


def test_all_tables(workspace: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
    df, labels, pairs = workspace
    timings: dict[str, float] = {}
    out = all_tables(df, labels, pairs=pairs, timings=timings)
    assert set(out) == set(TABLES) == set(timings)
    for name, table in out.items():
        assert isinstance(table, pd.DataFrame)
        assert not table.empty, name
    assert set(out["success"]["run"]) == {"run0", "run1", "run2"}
    selected = all_tables(df, labels, runs=["run2"], pairs=pairs)
    assert set(selected["passk"]["run"]) == {"run2"}
    assert set(selected["taxonomy"]["model"]) == {"model2"}
    assert selected["provenance"]["count"].sum() == (~df.loc[df["run"] == "run2", "success"]).sum()


def test_label_tables_empty_without_labels(workspace: tuple[pd.DataFrame, ...]) -> None:
    df = workspace[0]
    out = all_tables(df)
    for name in ("taxonomy", "taxonomy_turns", "provenance", "labeller"):
        assert out[name].empty and len(out[name].columns) > 0


def test_every_chart_builds(workspace: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
    df, labels, pairs = workspace
    out = all_tables(df, labels, pairs=pairs, options=TableOptions(label_policy="all"))
    for name, statistic in STATISTICS.items():
        assert statistic.chart is not None, name
        fig = statistic.chart(out[name])
        assert isinstance(fig, go.Figure)
        assert len(fig.data) > 0, name
    bars = charts.failure_bars(out["taxonomy"])
    first = out["taxonomy"].iloc[0]
    assert bars.data[0].error_y.arrayminus[0] == pytest.approx(first["share"] - first["ci_low"])
    heat = charts.success_heatmap(out["success"])
    # Two-level columns: the intent above its scope, one pair per grid cell.
    intents, scopes = heat.data[0].x
    cells = [c for c in out["success"].columns if "/" in str(c)]
    assert len(intents) == len(scopes) == len(cells) == 12
    assert [f"{i}/{s}" for i, s in zip(intents, scopes, strict=True)] == cells
    # Empty input yields an empty placeholder figure, not an exception.
    assert isinstance(charts.passk_lines(out["passk"].iloc[0:0]), go.Figure)


def test_labeller_agreement_hand_case() -> None:
    pairs = pd.DataFrame(
        {
            "trajectory_id": list("abcdef"),
            "llm_category": ["SQL", "SQL", "Code", "Code", None, "SQL"],
            "human_category": ["SQL", "Code", "Code", "Code", "SQL", None],
        }
    )
    out = labeller_agreement(pairs).set_index("category")
    # f has no human label and is skipped; e's missing LLM label is an override.
    assert out.loc["(overall)", "support"] == 5
    assert out.loc["(overall)", "precision"] == pytest.approx(3 / 5)
    assert out.loc["SQL", "precision"] == pytest.approx(1 / 2)
    assert out.loc["SQL", "recall"] == pytest.approx(1 / 2)
    assert out.loc["SQL", "override_rate"] == pytest.approx(1 / 2)
    assert out.loc["Code", "precision"] == 1.0
    assert out.loc["Code", "recall"] == pytest.approx(2 / 3)
    from sklearn.metrics import cohen_kappa_score

    human = ["SQL", "Code", "Code", "Code", "SQL"]
    llm = ["SQL", "SQL", "Code", "Code", "(none)"]
    assert out.loc["(overall)", "kappa"] == pytest.approx(cohen_kappa_score(human, llm))
