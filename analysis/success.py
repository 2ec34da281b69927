"""Success rates by clinical intent x query scope (EHR-Complex Table 3).

Also hosts the small helpers every other analysis module shares: run selection, a robust
boolean view of ``success`` and the canonical intent / scope orderings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from trajectories.model import CLINICAL_INTENTS, OTHER_INTENT, SCOPES

# The intents and scopes are the format's (trajectories.model); tables order rows by them.
#: The clinical intents only: "Other" is shown after them, as any unknown intent is.
INTENTS: tuple[str, ...] = CLINICAL_INTENTS
#: Label used when a task has no scope (the contract allows NULL scope).
NO_SCOPE = "unscoped"
#: Marker used by the aggregated ("overall") rows of the long tables.
ALL = "all"

GRID_LONG_COLUMNS = ["run", "model", "intent", "scope", "n", "n_success", "success_rate"]


def select_runs(df: pd.DataFrame, runs: Iterable[str] | None) -> pd.DataFrame:
    """Rows of ``df`` belonging to ``runs`` (all rows when ``runs`` is None)."""
    if runs is None:
        return df
    wanted = list(runs)
    return df[df["run"].isin(wanted)]


def run_order(df: pd.DataFrame, runs: Iterable[str] | None) -> list[str]:
    """Runs in the caller's order when given, else in order of first appearance.

    Tables are read side by side with the paper, so a stable, caller-controlled row order
    matters more than alphabetical sorting.
    """
    present = pd.unique(df["run"].astype(str)).tolist() if len(df) else []
    if runs is None:
        return present
    have = set(present)
    return [r for r in dict.fromkeys(runs) if r in have]


def scored_rows(df: pd.DataFrame, column: str = "success") -> pd.DataFrame:
    """Rows whose outcome is known: an unscored trajectory (no ground truth and no recorded
    outcome, ``success`` NULL) is neither a success nor a failure, so it is left out of every
    rate, Pass^k, SR(T) and grid."""
    if column not in df.columns:
        return df
    return df[df[column].notna()]


def success_array(df: pd.DataFrame, column: str = "success") -> np.ndarray:
    """``success`` as a plain numpy bool array (callers drop unscored rows first).

    The column may arrive as numpy bool, nullable ``boolean`` or object (DuckDB NULLs), so
    normalise once here instead of letting each statistic guess.
    """
    col = df[column]
    if col.dtype == bool:
        return col.to_numpy()
    return col.astype("boolean").fillna(False).to_numpy(dtype=bool)


def normalise_task_fields(df: pd.DataFrame) -> pd.DataFrame:
    """Copy of the columns statistics group by, with NULL intent/scope/model made explicit.

    Grouping drops NaN keys by default, which would silently lose trajectories; labelling
    them keeps every trajectory counted. A missing model falls back to the run name.
    Unscored trajectories (NULL ``success``) are dropped here, once for every statistic.
    """
    df = scored_rows(df)
    out = pd.DataFrame(
        {
            "run": df["run"].astype(str),
            "model": df["model"].astype("object").where(df["model"].notna(), df["run"])
            if "model" in df.columns
            else df["run"],
            "task_id": df["task_id"].astype(str) if "task_id" in df.columns else "",
            "intent": df["intent"].astype("object").fillna(OTHER_INTENT)
            if "intent" in df.columns
            else OTHER_INTENT,
            "scope": df["scope"].astype("object").fillna(NO_SCOPE)
            if "scope" in df.columns
            else NO_SCOPE,
            "success": success_array(df),
        },
        index=df.index,
    )
    out["model"] = out["model"].astype(str)
    out["intent"] = out["intent"].astype(str)
    out["scope"] = out["scope"].astype(str)
    return out


def ordered_values(observed: Iterable[str], canonical: Sequence[str]) -> list[str]:
    """Canonical values first (always, so empty cells show as NaN), then any extras sorted."""
    # Deduplicate through pandas first: iterating 100k arrow-backed strings in Python is slow.
    series = (
        observed if isinstance(observed, pd.Series) else pd.Series(list(observed), dtype=object)
    )
    values = series.unique()
    extra = sorted({str(v) for v in values} - set(canonical))
    return [*canonical, *extra]


def cell_name(intent: str, scope: str) -> str:
    return f"{intent}/{scope}"


def success_long(df: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """Long form of the grid: one row per run x model x intent x scope that has trajectories."""
    sub = normalise_task_fields(select_runs(df, runs))
    if sub.empty:
        return pd.DataFrame(columns=GRID_LONG_COLUMNS)
    grouped = sub.groupby(["run", "model", "intent", "scope"], sort=False)["success"]
    out = grouped.agg(n="size", n_success="sum").reset_index()
    out["n_success"] = out["n_success"].astype(int)
    out["success_rate"] = out["n_success"] / out["n"]
    order = {r: i for i, r in enumerate(run_order(sub, runs))}
    intents = ordered_values(out["intent"], INTENTS)
    scopes = ordered_values(out["scope"], SCOPES)
    out = out.assign(
        _r=out["run"].map(order),
        _i=out["intent"].map({v: i for i, v in enumerate(intents)}),
        _s=out["scope"].map({v: i for i, v in enumerate(scopes)}),
    ).sort_values(["_r", "model", "_i", "_s"], kind="stable")
    return out[GRID_LONG_COLUMNS].reset_index(drop=True)


def success_grid(df: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """Wide success table: one row per run (and model), one column per intent/scope cell.

    Columns: ``run, model, n, overall`` (pooled rate), one ``"<Intent>/<scope>"`` column per
    cell, then ``macro_avg`` (mean over non-empty cells, as the paper's Avg.),
    ``patient_mean``, ``population_mean`` (means over that scope's non-empty cells) and
    ``patient_population_gap`` (patient - population). Cells without tasks are NaN, never 0,
    so that they drop out of every mean instead of dragging it down.
    """
    long = success_long(df, runs)
    meta_cols = ["run", "model", "n", "overall"]
    if long.empty:
        cells = [cell_name(i, s) for i in INTENTS for s in SCOPES]
        tail = ["macro_avg", "patient_mean", "population_mean", "patient_population_gap"]
        return pd.DataFrame(columns=[*meta_cols, *cells, *tail])

    intents = ordered_values(long["intent"], INTENTS)
    scopes = ordered_values(long["scope"], SCOPES)
    # Only keep the catch-all intent / unscoped columns when data actually uses them; the six
    # paper intents x two scopes are always shown.
    keep_intents = [i for i in intents if i in INTENTS or (long["intent"] == i).any()]
    keep_scopes = [s for s in scopes if s in SCOPES or (long["scope"] == s).any()]
    cells = [cell_name(i, s) for i in keep_intents for s in keep_scopes]

    keyed = long.assign(cell=long["intent"] + "/" + long["scope"])
    wide = keyed.pivot_table(
        index=["run", "model"], columns="cell", values="success_rate", aggfunc="first", sort=False
    ).reindex(columns=cells)
    totals = keyed.groupby(["run", "model"], sort=False)[["n", "n_success"]].sum()

    grid = wide.astype(float)
    patient_cols = [c for c in cells if c.endswith("/patient")]
    population_cols = [c for c in cells if c.endswith("/population")]
    # DataFrame.mean skips NaN, which is exactly "mean over non-empty cells"; an all-NaN row
    # stays NaN.
    grid["macro_avg"] = grid[cells].mean(axis=1)
    grid["patient_mean"] = grid[patient_cols].mean(axis=1)
    grid["population_mean"] = grid[population_cols].mean(axis=1)
    grid["patient_population_gap"] = grid["patient_mean"] - grid["population_mean"]
    grid.insert(0, "n", totals["n"].reindex(grid.index).astype(int))
    grid.insert(1, "overall", (totals["n_success"] / totals["n"]).reindex(grid.index))
    grid = grid.reset_index()
    grid.columns.name = None
    return grid
