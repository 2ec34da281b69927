"""Registry of analysis tables: name -> ``(df, labels, runs) -> DataFrame``.

A uniform signature lets the CLI and the UI list, compute and export every table without
knowing each function's parameters. Tables that need labels return an empty frame (with the
right columns) when ``labels`` is None.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pandas as pd

from analysis.failures import (
    DISTRIBUTION_COLUMNS,
    PROVENANCE_COLUMNS,
    TURNS_CATEGORY_COLUMNS,
    failure_distribution,
    provenance_share,
    turns_per_category,
)
from analysis.labeller import LABELLER_COLUMNS, labeller_agreement
from analysis.passk import pass_k
from analysis.robustness import robustness
from analysis.success import success_grid
from analysis.turns import success_by_turn_budget, turns_table

Runs = Iterable[str] | None
TableFn = Callable[[pd.DataFrame, pd.DataFrame | None, Runs], pd.DataFrame]


def _success(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return success_grid(df, runs)


def _passk(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return pass_k(df, runs)


def _turns(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return turns_table(df, runs)


def _turn_budget(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return success_by_turn_budget(df, runs=runs)


def _taxonomy(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    if labels is None or labels.empty:
        return pd.DataFrame(columns=DISTRIBUTION_COLUMNS)
    return failure_distribution(df, labels, runs)


def _taxonomy_turns(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    if labels is None or labels.empty:
        return pd.DataFrame(columns=TURNS_CATEGORY_COLUMNS)
    return turns_per_category(df, labels, runs)


def _provenance(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    if labels is None or labels.empty or "provenance" not in labels.columns:
        return pd.DataFrame(columns=PROVENANCE_COLUMNS)
    if runs is not None:
        # Restrict to labels of the selected runs' trajectories, like the other tables.
        ids = df.loc[df["run"].isin(list(runs)), "id"].astype(str)
        labels = labels[labels["trajectory_id"].astype(str).isin(ids)]
    return provenance_share(labels)


def _robustness(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    return robustness(df, runs)


def _labeller(df: pd.DataFrame, labels: pd.DataFrame | None, runs: Runs) -> pd.DataFrame:
    """Expects ``labels`` to be the pairs frame (trajectory_id, llm_category, human_category)."""
    if labels is None or not {"llm_category", "human_category"} <= set(labels.columns):
        return pd.DataFrame(columns=LABELLER_COLUMNS)
    if runs is not None:
        ids = df.loc[df["run"].isin(list(runs)), "id"].astype(str)
        labels = labels[labels["trajectory_id"].astype(str).isin(ids)]
    return labeller_agreement(labels)


TABLES: dict[str, TableFn] = {
    "success": _success,
    "passk": _passk,
    "turns": _turns,
    "turn_budget": _turn_budget,
    "taxonomy": _taxonomy,
    "taxonomy_turns": _taxonomy_turns,
    "provenance": _provenance,
    "robustness": _robustness,
    "labeller": _labeller,
}


def all_tables(
    df: pd.DataFrame,
    labels: pd.DataFrame | None = None,
    runs: Runs = None,
    pairs: pd.DataFrame | None = None,
    timings: dict[str, float] | None = None,
) -> dict[str, pd.DataFrame]:
    """Every registered table. ``labeller`` uses ``pairs`` (LLM vs human categories) when given.

    Pass a dict as ``timings`` to receive seconds per table (used by the benchmark).
    """
    run_list = list(runs) if runs is not None else None
    out: dict[str, pd.DataFrame] = {}
    for name, fn in TABLES.items():
        start = time.perf_counter()
        source = pairs if name == "labeller" else labels
        out[name] = fn(df, source, run_list)
        if timings is not None:
            timings[name] = time.perf_counter() - start
    return out
