"""Interaction turns (EHR-Complex Fig. 5 / App. I).

``turns_table`` compares how many action turns runs spend per scope on the tasks that *every*
selected run solved, so that a run is not credited with short trajectories merely because it
only solves easy tasks. ``success_by_turn_budget`` gives SR(T): by default the paper's share of
the commonly solved tasks completed within at most T turns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from analysis.success import (
    ALL,
    SCOPES,
    normalise_task_fields,
    ordered_values,
    run_order,
    select_runs,
)

TURNS_COLUMNS = ["run", "model", "scope", "n_tasks", "n_trajectories", "mean_turns", "median_turns"]
BUDGET_COLUMNS = ["run", "model", "definition", "budget", "n", "n_success_within", "sr"]


def _with_turns(df: pd.DataFrame) -> pd.DataFrame:
    base = normalise_task_fields(df)
    base["n_turns"] = pd.to_numeric(df["n_turns"], errors="coerce").astype(float)
    return base


def common_solved_tasks(df: pd.DataFrame, runs: Iterable[str] | None = None) -> set[str]:
    """Task ids that every selected run solved at least once."""
    sub = normalise_task_fields(select_runs(df, runs))
    if sub.empty:
        return set()
    n_runs = sub["run"].nunique()
    solved = sub[sub["success"]].groupby("task_id")["run"].nunique()
    return set(solved.index[solved == n_runs])


def solved_task_counts(df: pd.DataFrame, runs: Iterable[str] | None = None) -> dict[str, int]:
    """Distinct tasks each selected run solved, in run order (0 for a run that solved none).

    When no task is commonly solved, the turns tables are empty; these counts say why (a run
    that solved nothing, or runs that solved different tasks)."""
    sub = normalise_task_fields(select_runs(df, runs))
    solved = sub[sub["success"]].groupby("run")["task_id"].nunique()
    return {run: int(solved.get(run, 0)) for run in run_order(sub, runs)}


def turns_table(df: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """Mean / median turns of successful trajectories per run x scope, on commonly solved tasks.

    Rows include a scope ``"all"`` per run. ``n_tasks`` counts common tasks in that scope and
    ``n_trajectories`` the successful trajectories averaged over (several per task when a run
    has several rollouts).
    """
    sub = select_runs(df, runs)
    common = common_solved_tasks(sub)
    base = _with_turns(sub)
    base = base[base["success"] & base["task_id"].isin(common)]
    if base.empty:
        return pd.DataFrame(columns=TURNS_COLUMNS)
    views = pd.concat([base, base.assign(scope=ALL)], ignore_index=True)
    out = (
        views.groupby(["run", "model", "scope"], sort=False)
        .agg(
            n_tasks=("task_id", "nunique"),
            n_trajectories=("n_turns", "size"),
            mean_turns=("n_turns", "mean"),
            median_turns=("n_turns", "median"),
        )
        .reset_index()
    )
    scopes = [*ordered_values(out["scope"][out["scope"] != ALL], SCOPES), ALL]
    order = {r: i for i, r in enumerate(run_order(sub, runs))}
    out = out.assign(
        _r=out["run"].map(order), _s=out["scope"].map({s: i for i, s in enumerate(scopes)})
    ).sort_values(["_r", "model", "_s"], kind="stable")
    return out[TURNS_COLUMNS].reset_index(drop=True)


#: SR(T) definitions. ``common_solved`` (default) is EHR-Complex's (Fig. 5 / App. I): over the
#: tasks every selected run solved, the share completed within T turns, so every curve reaches
#: 1. ``all_trajectories`` divides by every scored trajectory of the run instead, so the curve
#: rises towards the run's overall success rate.
SR_DEFINITIONS = ("common_solved", "all_trajectories")


def success_by_turn_budget(
    df: pd.DataFrame,
    budgets: Sequence[int] = (1, 3, 5, 10, 15, 20),
    runs: Iterable[str] | None = None,
    definition: str = "common_solved",
) -> pd.DataFrame:
    """SR(T) per run under ``definition`` (see ``SR_DEFINITIONS``), named in the ``definition``
    column.

    ``common_solved``: the denominator is the run's successful trajectories on the tasks every
    selected run solved (with one rollout per task, exactly the paper's fraction of tasks).
    ``all_trajectories``: the denominator is every scored trajectory of the run.
    """
    if definition not in SR_DEFINITIONS:
        raise ValueError(
            f"unknown SR(T) definition {definition!r} (choose from {', '.join(SR_DEFINITIONS)})"
        )
    sub = select_runs(df, runs)
    base = _with_turns(sub)
    if definition == "common_solved":
        common = common_solved_tasks(sub)
        base = base[base["success"] & base["task_id"].isin(common)]
    if base.empty or len(budgets) == 0:
        return pd.DataFrame(columns=BUDGET_COLUMNS)
    budget_arr = np.asarray(list(budgets), dtype=float)
    # One (trajectories x budgets) boolean matrix, then a single groupby-sum: no Python loop
    # over trajectories. NaN turns compare False, i.e. never "within budget".
    within = base["success"].to_numpy()[:, None] & (
        base["n_turns"].to_numpy()[:, None] <= budget_arr[None, :]
    )
    hits = pd.DataFrame(within, columns=list(range(len(budget_arr))), index=base.index)
    keys = [base["run"], base["model"]]
    counts = hits.groupby(keys, sort=False).sum()
    sizes = base.groupby(["run", "model"], sort=False).size()
    long = counts.stack().reset_index()
    long.columns = ["run", "model", "_b", "n_success_within"]
    long["budget"] = budget_arr[long["_b"].to_numpy()].astype(int)
    long["n"] = sizes.reindex(pd.MultiIndex.from_frame(long[["run", "model"]])).to_numpy()
    long["n_success_within"] = long["n_success_within"].astype(int)
    long["sr"] = long["n_success_within"] / long["n"]
    long["definition"] = definition
    order = {r: i for i, r in enumerate(run_order(sub, runs))}
    long = long.assign(_r=long["run"].map(order)).sort_values(["_r", "model", "_b"], kind="stable")
    return long[BUDGET_COLUMNS].reset_index(drop=True)
