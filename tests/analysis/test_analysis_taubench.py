"""Pass^k on the recorded tau-bench style trajectories, checked by hand from raw rewards."""

from __future__ import annotations

import json
from math import comb

import pandas as pd
import pytest

from analysis.passk import pass_k
from analysis.success import success_grid
from tests.support import REAL_TRAJECTORIES, require_shared


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    """One row per recorded trajectory, straight from the raw files."""
    rows = []
    for path in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json")):
        for rec in json.loads(path.read_text()):
            rows.append(
                {
                    "id": f"{path.stem}:{rec['task_idx']}:{rec['trial']}",
                    "run": path.stem,
                    "model": path.stem,
                    "temperature": 0.0,
                    "rollout": int(rec["trial"]),
                    "task_id": str(rec["task_idx"]),
                    "intent": None,
                    "scope": None,
                    "recorded_reward": float(rec["reward"]),
                    "success": float(rec["reward"]) == 1.0,
                }
            )
    return pd.DataFrame(rows)


def _by_hand(df: pd.DataFrame, run: str, k: int) -> tuple[float, float, int]:
    """Plain-Python Pass^k / Pass@k from the raw rewards of one run."""
    rewards: dict[str, list[float]] = {}
    for _, row in df[df["run"] == run].iterrows():
        rewards.setdefault(row["task_id"], []).append(row["recorded_reward"])
    hats, ats = [], []
    for values in rewards.values():
        n, c = len(values), sum(v == 1.0 for v in values)
        if n < k:
            continue
        hats.append(comb(c, k) / comb(n, k))
        ats.append(1 - comb(n - c, k) / comb(n, k))
    return sum(hats) / len(hats), sum(ats) / len(ats), len(hats)


def test_pass_k_matches_rewards_per_run(df: pd.DataFrame) -> None:
    out = pass_k(df)
    overall = out[(out["scope"] == "all") & (out["intent"] == "all")]
    assert set(overall["run"]) == set(df["run"])
    checked = 0
    for run in df["run"].unique():
        n_max = int(df[df["run"] == run].groupby("task_id").size().max())
        ks = sorted(overall.loc[overall["run"] == run, "k"])
        assert ks == list(range(1, min(4, n_max) + 1))
        for k in ks:
            hat, at, n_tasks = _by_hand(df, run, k)
            row = overall[(overall["run"] == run) & (overall["k"] == k)].iloc[0]
            assert row["pass_hat_k"] == pytest.approx(hat)
            assert row["pass_at_k"] == pytest.approx(at)
            assert row["n_tasks"] == n_tasks
            checked += 1
    assert checked >= 4


def test_pass_hat_4_is_share_of_tasks_with_all_four_rewards(df: pd.DataFrame) -> None:
    out = pass_k(df)
    four = out[(out["scope"] == "all") & (out["intent"] == "all") & (out["k"] == 4)]
    for run, row in four.set_index("run").iterrows():
        per_task = df[df["run"] == run].groupby("task_id")["recorded_reward"]
        full = per_task.apply(lambda r: len(r) >= 4 and bool((r == 1.0).all()))
        eligible = per_task.size() >= 4
        assert row["pass_hat_k"] == pytest.approx(full[eligible].mean())
        any_ok = per_task.apply(lambda r: bool((r == 1.0).any()))
        assert row["pass_at_k"] == pytest.approx(any_ok[eligible].mean())


def test_pass_1_equals_success_rate(df: pd.DataFrame) -> None:
    out = pass_k(df)
    one = out[(out["scope"] == "all") & (out["intent"] == "all") & (out["k"] == 1)]
    grid = success_grid(df).set_index("run")
    for run, row in one.set_index("run").iterrows():
        # Every task has the same number of rollouts within a run, so Pass^1 = pooled SR.
        assert row["pass_hat_k"] == pytest.approx(grid.loc[str(run), "overall"])
