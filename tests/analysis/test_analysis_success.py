"""Success grid: NaN cells, macro average, patient/population gap, long form."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.success import success_grid, success_long


def _rows(run: str, intent: str | None, scope: str | None, outcomes: list[bool]) -> list[dict]:
    return [
        {
            "id": f"{run}-{intent}-{scope}-{i}",
            "run": run,
            "model": f"m-{run}",
            "task_id": f"{intent}-{scope}-{i}",
            "intent": intent,
            "scope": scope,
            "success": ok,
        }
        for i, ok in enumerate(outcomes)
    ]


def _nan(grid: pd.DataFrame, run: str, column: str) -> bool:
    return bool(grid[column].isna()[run])


@pytest.fixture
def df() -> pd.DataFrame:
    rows = (
        _rows("A", "Labs", "patient", [True, True, False, False])  # 0.5
        + _rows("A", "Labs", "population", [False, False, False, True])  # 0.25
        + _rows("A", "Cost", "patient", [True])  # 1.0
        + _rows("B", "Labs", "patient", [True])  # 1.0
    )
    return pd.DataFrame(rows)


def test_grid_values_nan_cells_and_macro(df: pd.DataFrame) -> None:
    grid = success_grid(df).set_index("run")
    assert grid.loc["A", "Labs/patient"] == 0.5
    assert grid.loc["A", "Labs/population"] == 0.25
    # Empty cells are NaN, not 0, and the paper's 6 x 2 layout is always present.
    assert _nan(grid, "A", "Cost/population")
    assert _nan(grid, "A", "Vitals/patient")
    assert _nan(grid, "B", "Labs/population")
    assert grid.loc["A", "macro_avg"] == pytest.approx((0.5 + 0.25 + 1.0) / 3)
    assert grid.loc["A", "patient_mean"] == pytest.approx(0.75)
    assert grid.loc["A", "population_mean"] == pytest.approx(0.25)
    assert grid.loc["A", "patient_population_gap"] == pytest.approx(0.5)
    assert grid.loc["A", "overall"] == pytest.approx(4 / 9)
    assert grid.loc["A", "n"] == 9
    assert grid.loc["B", "macro_avg"] == 1.0
    assert _nan(grid, "B", "population_mean")
    assert _nan(grid, "B", "patient_population_gap")
    assert grid.loc["A", "model"] == "m-A"


def test_runs_selection_and_order(df: pd.DataFrame) -> None:
    assert list(success_grid(df, runs=["B", "A"])["run"]) == ["B", "A"]
    assert list(success_grid(df, runs=["B"])["run"]) == ["B"]


def test_null_intent_and_scope_are_counted(df: pd.DataFrame) -> None:
    extra = pd.DataFrame(_rows("A", None, None, [True, False]))
    grid = success_grid(pd.concat([df, extra], ignore_index=True)).set_index("run")
    assert grid.loc["A", "Other/unscoped"] == 0.5
    assert grid.loc["A", "n"] == 11
    # The unscoped cell enters the macro average but neither scope mean.
    assert grid.loc["A", "macro_avg"] == pytest.approx((0.5 + 0.25 + 1.0 + 0.5) / 4)
    assert grid.loc["A", "patient_mean"] == pytest.approx(0.75)


def test_unscored_trajectory_is_left_out_of_the_grid() -> None:
    df = pd.DataFrame(_rows("A", "Labs", "patient", [True, False, False]))
    df["success"] = pd.array([True, False, None], dtype="boolean")
    grid = success_grid(df)
    assert grid.loc[0, "Labs/patient"] == 0.5
    assert grid.loc[0, "n"] == 2


def test_long_form(df: pd.DataFrame) -> None:
    long = success_long(df)
    assert list(long.columns) == [
        "run",
        "model",
        "intent",
        "scope",
        "n",
        "n_success",
        "success_rate",
    ]
    row = long[(long["run"] == "A") & (long["intent"] == "Labs") & (long["scope"] == "population")]
    assert row.iloc[0]["n"] == 4 and row.iloc[0]["n_success"] == 1
    assert len(long) == 4


def test_empty() -> None:
    out = success_grid(pd.DataFrame(columns=["id", "run", "model", "intent", "scope", "success"]))
    assert out.empty and "macro_avg" in out.columns
