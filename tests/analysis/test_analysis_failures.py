"""Wilson interval, failure distribution, turns per category, provenance shares."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.failures import (
    failure_distribution,
    provenance_share,
    turns_per_category,
    wilson_interval,
)


def test_wilson_reference_values() -> None:
    low, high = wilson_interval(8, 10)
    assert float(low) == pytest.approx(0.4902, abs=1e-4)
    assert float(high) == pytest.approx(0.9433, abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert float(low) == 0.0
    assert float(high) == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert float(high) == 1.0
    low, high = wilson_interval(0, 0)
    assert np.isnan(low) and np.isnan(high)


def test_wilson_matches_the_closed_form() -> None:
    # An independent oracle: the Wilson score formula written out here, not the library the
    # product calls.
    x = np.array([0, 1, 3, 17, 50, 99, 100, 7], dtype=float)
    n = np.array([5, 40, 3, 200, 100, 100, 100, 1000], dtype=float)
    z = 1.959963984540054
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = wilson_interval(x.astype(int), n.astype(int))
    np.testing.assert_allclose(low, np.clip(centre - half, 0, 1), atol=1e-9)
    np.testing.assert_allclose(high, np.clip(centre + half, 0, 1), atol=1e-9)


@pytest.fixture
def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    df = pd.DataFrame(
        {
            "id": [f"t{i}" for i in range(8)],
            "run": ["r1"] * 5 + ["r2"] * 3,
            "model": ["M1"] * 5 + ["M2"] * 3,
            "task_id": [str(i) for i in range(8)],
            "intent": "Labs",
            "scope": "patient",
            "success": False,
            "n_turns": [2, 4, 6, 8, 10, 3, 5, 7],
        }
    )
    labels = pd.DataFrame(
        {
            "trajectory_id": ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "ghost"],
            "category": ["SQL", "SQL", "SQL", "Code", None, "Code", "Code", "SQL", "SQL"],
            "secondary_category": None,
            "first_error_step": 1,
            "provenance": [
                "adjudicated",
                "human_agreed",
                "human_single",
                "llm_only",
                "llm_only",
                "llm_only",
                "human_single",
                "llm_only",
                "llm_only",
            ],
        }
    )
    return df, labels


def test_failure_distribution(frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    df, labels = frames
    out = failure_distribution(df, labels).set_index(["model", "category"])
    assert out.loc[("M1", "SQL"), "count"] == 3
    assert out.loc[("M1", "SQL"), "n"] == 4  # the unlabelled t4 and the unknown id are dropped
    assert out.loc[("M1", "SQL"), "share"] == pytest.approx(0.75)
    assert out.loc[("M2", "Code"), "share"] == pytest.approx(2 / 3)
    low, high = wilson_interval(3, 4)
    assert out.loc[("M1", "SQL"), "ci_low"] == pytest.approx(float(low))
    assert out.loc[("M1", "SQL"), "ci_high"] == pytest.approx(float(high))
    assert out.groupby(level="model")["share"].sum().tolist() == pytest.approx([1.0, 1.0])
    only = failure_distribution(df, labels, runs=["r2"])
    assert set(only["model"]) == {"M2"}


def test_turns_per_category(frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    df, labels = frames
    out = turns_per_category(df, labels).set_index(["model", "category"])
    assert out.loc[("M1", "SQL"), "mean_turns"] == pytest.approx(4.0)
    assert out.loc[("M1", "Code"), "mean_turns"] == pytest.approx(8.0)
    assert out.loc[("M2", "Code"), "n"] == 2


def test_provenance_share(frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    _, labels = frames
    out = provenance_share(labels).set_index("provenance")
    assert list(out.index) == ["adjudicated", "human_agreed", "human_single", "llm_only"]
    assert out.loc["llm_only", "count"] == 5
    assert out.loc["llm_only", "share"] == pytest.approx(5 / 9)
    assert out.groupby("source")["count"].sum().to_dict() == {
        "adjudicated": 1,
        "human": 3,
        "llm_only": 5,
    }
