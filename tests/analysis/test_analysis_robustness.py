"""Clean vs Noise on pairs: per intent, per noise type, pooled, and the drop."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.robustness import paired_outcomes, robustness, robustness_wide


@pytest.fixture
def df() -> pd.DataFrame:
    spec = [
        # pair, intent, noise_type, clean ok, noise ok
        ("p1", "Labs", "record", True, False),
        ("p2", "Labs", "value", True, True),
        ("p3", "Cost", "record", False, False),
        ("p4", "Cost", "query", True, False),
    ]
    rows = []
    for run in ("A", "B"):
        for pair, intent, nt, c_ok, n_ok in spec:
            for variant, ok in (("clean", c_ok), ("noise", n_ok)):
                rows.append(
                    {
                        "id": f"{run}{pair}{variant}",
                        "run": run,
                        "model": run.lower(),
                        "task_id": f"{pair}-{variant}",
                        "intent": intent,
                        "scope": "patient",
                        "pair_id": pair,
                        "variant": variant,
                        "noise_type": nt if variant == "noise" else None,
                        "success": ok if run == "A" else True,
                    }
                )
    # An unpaired clean task and a task without pair information are ignored.
    rows.append(
        {
            "id": "Ax",
            "run": "A",
            "model": "a",
            "task_id": "x",
            "intent": "Labs",
            "scope": "patient",
            "pair_id": "p9",
            "variant": "clean",
            "noise_type": None,
            "success": True,
        }
    )
    rows.append(
        {
            "id": "Ay",
            "run": "A",
            "model": "a",
            "task_id": "y",
            "intent": "Labs",
            "scope": "patient",
            "pair_id": None,
            "variant": None,
            "noise_type": None,
            "success": False,
        }
    )
    return pd.DataFrame(rows)


def test_paired_outcomes(df: pd.DataFrame) -> None:
    pairs = paired_outcomes(df)
    assert len(pairs) == 8
    assert set(pairs.loc[pairs["run"] == "A", "pair_id"]) == {"p1", "p2", "p3", "p4"}


def test_robustness_drop(df: pd.DataFrame) -> None:
    out = robustness(df).set_index(["run", "by", "group"])
    assert out.loc[("A", "all", "all"), "clean"] == pytest.approx(0.75)
    assert out.loc[("A", "all", "all"), "noise"] == pytest.approx(0.25)
    assert out.loc[("A", "all", "all"), "drop"] == pytest.approx(0.5)
    assert out.loc[("A", "all", "all"), "n_pairs"] == 4
    assert out.loc[("A", "intent", "Labs"), "drop"] == pytest.approx(0.5)
    assert out.loc[("A", "intent", "Cost"), "clean"] == pytest.approx(0.5)
    assert out.loc[("A", "noise_type", "record"), "n_pairs"] == 2
    assert out.loc[("A", "noise_type", "record"), "drop"] == pytest.approx(0.5)
    assert out.loc[("A", "noise_type", "value"), "drop"] == 0.0
    assert robustness(df, runs=["B"])["drop"].eq(0).all()
    wide = robustness_wide(robustness(df)).set_index("run")
    assert wide.loc["A", "Labs clean"] == 1.0 and wide.loc["A", "all noise"] == 0.25


def test_rollouts_are_averaged(df: pd.DataFrame) -> None:
    extra = df[(df["run"] == "A") & (df["pair_id"] == "p1") & (df["variant"] == "noise")].copy()
    extra["id"] = "second-rollout"
    extra["success"] = True
    out = robustness(pd.concat([df, extra], ignore_index=True), runs=["A"])
    labs = out[(out["by"] == "intent") & (out["group"] == "Labs")].iloc[0]
    assert labs["noise"] == pytest.approx((0.5 + 1.0) / 2)
    assert set(out["run"]) == {"A"}


def test_no_pairs() -> None:
    df = pd.DataFrame(
        {
            "id": ["a"],
            "run": ["r"],
            "model": ["m"],
            "task_id": ["1"],
            "intent": ["Labs"],
            "scope": ["patient"],
            "pair_id": [None],
            "variant": [None],
            "noise_type": [None],
            "success": [True],
        }
    )
    assert robustness(df).empty
