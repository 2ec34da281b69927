"""Pass^k / Pass@k against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.passk import comb_table, pass_k, pass_k_per_task, pass_k_wide


def _frame(
    outcomes: dict[str, list[bool]], run: str = "r", **task_fields: dict[str, str]
) -> pd.DataFrame:
    rows = []
    for task, results in outcomes.items():
        for i, ok in enumerate(results, start=1):
            row = {
                "id": f"{run}-{task}-{i}",
                "run": run,
                "model": "m",
                "temperature": 0.0,
                "rollout": i,
                "task_id": task,
                "intent": "Labs",
                "scope": "patient",
                "success": ok,
            }
            for field, mapping in task_fields.items():
                row[field] = mapping[task]
            rows.append(row)
    return pd.DataFrame(rows)


def test_comb_table_matches_math_comb() -> None:
    table = comb_table(9, 4)
    for m in range(10):
        for k in range(5):
            assert table[m, k] == math.comb(m, k)


def test_n4_c2_hand_values() -> None:
    hat, at = pass_k_per_task(np.array([4]), np.array([2]), 1)
    assert hat[0] == pytest.approx(0.5) and at[0] == pytest.approx(0.5)
    hat, at = pass_k_per_task(np.array([4]), np.array([2]), 2)
    assert hat[0] == pytest.approx(1 / 6)
    assert at[0] == pytest.approx(5 / 6)
    hat, at = pass_k_per_task(np.array([4]), np.array([2]), 3)
    assert hat[0] == 0.0 and at[0] == 1.0
    hat, at = pass_k_per_task(np.array([4]), np.array([3]), 3)
    assert hat[0] == pytest.approx(1 / 4) and at[0] == 1.0


def test_pass_k_table_overall_and_views() -> None:
    df = _frame(
        {"a": [True, True, False, False], "b": [True] * 4, "c": [False] * 4},
        scope={"a": "patient", "b": "patient", "c": "population"},
        intent={"a": "Labs", "b": "Cost", "c": "Labs"},
    )
    out = pass_k(df)
    assert list(out.columns) == [
        "run",
        "scope",
        "intent",
        "k",
        "pass_hat_k",
        "pass_at_k",
        "n_tasks",
        "temperature",
    ]
    overall = out[(out["scope"] == "all") & (out["intent"] == "all")].set_index("k")
    assert list(overall.index) == [1, 2, 3, 4]
    assert overall.loc[1, "pass_hat_k"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert overall.loc[2, "pass_hat_k"] == pytest.approx((1 / 6 + 1 + 0) / 3)
    assert overall.loc[2, "pass_at_k"] == pytest.approx((5 / 6 + 1 + 0) / 3)
    assert overall.loc[4, "pass_hat_k"] == pytest.approx(1 / 3)
    assert overall.loc[4, "pass_at_k"] == pytest.approx(2 / 3)
    assert (overall["n_tasks"] == 3).all()
    assert (out["temperature"] == 0.0).all()

    patient = out[(out["scope"] == "patient") & (out["intent"] == "all")].set_index("k")
    assert patient.loc[2, "pass_hat_k"] == pytest.approx((1 / 6 + 1) / 2)
    labs = out[(out["scope"] == "all") & (out["intent"] == "Labs")].set_index("k")
    assert labs.loc[2, "pass_at_k"] == pytest.approx((5 / 6 + 0) / 2)
    assert labs.loc[1, "n_tasks"] == 2


def test_tasks_with_fewer_rollouts_are_excluded() -> None:
    df = _frame({"a": [True, False, True, True], "b": [True, True]})
    out = pass_k(df)
    overall = out[(out["scope"] == "all") & (out["intent"] == "all")].set_index("k")
    assert overall.loc[2, "n_tasks"] == 2
    assert overall.loc[3, "n_tasks"] == 1
    # k = 3 uses only task a (3 of 4 correct): C(3,3)/C(4,3) = 1/4.
    assert overall.loc[3, "pass_hat_k"] == pytest.approx(0.25)
    assert overall.loc[3, "pass_at_k"] == pytest.approx(1.0)


def test_k_limited_per_run_and_k_max() -> None:
    many = _frame({"a": [True, False, True, True, False]}, run="many")
    single = _frame({"a": [True], "b": [False]}, run="single")
    out = pass_k(pd.concat([many, single]), k_max=4)
    assert sorted(out.loc[out["run"] == "many", "k"].unique()) == [1, 2, 3, 4]
    assert sorted(out.loc[out["run"] == "single", "k"].unique()) == [1]
    out = pass_k(pd.concat([many, single]), runs=["single"])
    assert set(out["run"]) == {"single"}


def test_run_order_follows_selection_and_wide_layout() -> None:
    df = pd.concat([_frame({"a": [True, False]}, run="x"), _frame({"a": [True, True]}, run="y")])
    out = pass_k(df, runs=["y", "x"])
    assert list(dict.fromkeys(out["run"])) == ["y", "x"]
    wide = pass_k_wide(out)
    assert list(wide.columns) == ["run", "pass_hat_1", "pass_hat_2", "pass_at_1", "pass_at_2"]
    assert wide.set_index("run").loc["x", "pass_hat_2"] == 0.0


def test_empty_input() -> None:
    out = pass_k(_frame({"a": [True]}).iloc[0:0])
    assert out.empty and "pass_hat_k" in out.columns


def test_an_undecided_rollout_is_unknown_not_a_failure() -> None:
    import pandas as pd

    from analysis.passk import task_outcomes

    frame = pd.DataFrame({"run": ["r"] * 3, "task_id": ["t"] * 3, "scope": ["patient"] * 3,
                          "intent": ["Labs"] * 3,
                          "success": pd.array([True, None, True], dtype="boolean")})
    row = task_outcomes(frame).iloc[0]
    assert (row["n"], row["c"]) == (2, 2)
