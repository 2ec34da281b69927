"""Failure-category statistics (EHR-Complex Fig. 6 / App. G).

Shares come with Wilson score intervals: label sets per model are a few hundred trajectories,
and Wilson keeps sensible bounds near 0 and 1 where the normal approximation does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint

from analysis.success import normalise_task_fields, run_order, select_runs
from labeling.store.records import CONTRACT_PROVENANCES, PROVENANCE_SOURCE, PROVENANCES
from taxonomy.model import builtin_taxonomies

#: Two-sided 95% normal quantile.
Z95 = 1.959963984540054

DISTRIBUTION_COLUMNS = ["model", "category", "count", "n", "share", "ci_low", "ci_high"]
TURNS_CATEGORY_COLUMNS = ["model", "category", "n", "mean_turns", "median_turns"]
PROVENANCE_COLUMNS = ["provenance", "source", "count", "share"]


def wilson_interval(
    successes: np.ndarray | pd.Series | int,
    n: np.ndarray | pd.Series | int,
    z: float = Z95,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised Wilson score interval for ``successes / n`` (statsmodels); NaN where
    ``n == 0``."""
    x = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    low, high = proportion_confint(x, np.where(m > 0, m, 1.0), alpha=2.0 * norm.sf(z),
                                   method="wilson")
    low, high = np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)
    # At p = 0 or 1 the bound equals the proportion exactly; pin it so floating-point noise
    # never shows as "-0.0000" or "1.0000000002".
    low = np.where(x == 0, 0.0, low)
    high = np.where(x == m, 1.0, high)
    empty = m <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


@lru_cache(maxsize=1)
def _display_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for tax in builtin_taxonomies().values():
        for cat in tax.categories:
            names.setdefault(cat.key, cat.name)
    return names


def category_display_name(key: str) -> str:
    """The category's display name ("SQL Logic Error") for a stored key; unknown keys (custom
    taxonomies) are shown as they are."""
    return _display_names().get(key, key)


def _labelled(
    df: pd.DataFrame, labels: pd.DataFrame, runs: Iterable[str] | None
) -> tuple[pd.DataFrame, list[str]]:
    """Labels joined to their trajectories (inner join), keeping model, run and turns."""
    sub = select_runs(df, runs)
    base = normalise_task_fields(sub)
    base["id"] = sub["id"].astype(str)
    base["n_turns"] = pd.to_numeric(sub["n_turns"], errors="coerce").astype(float)
    lab = labels[labels["category"].notna()][["trajectory_id", "category"]].copy()
    lab["trajectory_id"] = lab["trajectory_id"].astype(str)
    lab["category"] = lab["category"].astype(str).map(category_display_name)
    # A trajectory should carry one final label; if a caller passes duplicates keep the first
    # rather than double-counting it.
    lab = lab.drop_duplicates("trajectory_id")
    joined = base.merge(lab, left_on="id", right_on="trajectory_id", how="inner")
    # Keep models in the order of their first run so tables line up with the other analyses.
    rank = {r: i for i, r in enumerate(run_order(sub, runs))}
    first_run = joined["run"].map(rank).groupby(joined["model"], sort=False).min()
    models = [str(m) for m in first_run.sort_values(kind="stable").index]
    return joined, models


def failure_distribution(
    df: pd.DataFrame, labels: pd.DataFrame, runs: Iterable[str] | None = None
) -> pd.DataFrame:
    """Per model x category: count, share of that model's labelled failures, Wilson 95% CI.

    Every category seen in the labels appears for every model (count 0 where unused) so
    grouped bar charts align.
    """
    joined, models = _labelled(df, labels, runs)
    if joined.empty:
        return pd.DataFrame(columns=DISTRIBUTION_COLUMNS)
    # Most frequent category first (ties alphabetical) so bars read like the paper's figure.
    freq = joined["category"].value_counts()
    categories = sorted(freq.index, key=lambda c: (-int(freq[c]), str(c)))
    counts = (
        joined.groupby(["model", "category"])
        .size()
        .unstack(fill_value=0)
        .reindex(index=models, columns=categories, fill_value=0)
    )
    long = counts.stack().reset_index()
    long.columns = ["model", "category", "count"]
    long["n"] = long["model"].map(counts.sum(axis=1)).astype(int)
    long["count"] = long["count"].astype(int)
    long["share"] = long["count"] / long["n"]
    low, high = wilson_interval(long["count"].to_numpy(), long["n"].to_numpy())
    long["ci_low"] = low
    long["ci_high"] = high
    return long[DISTRIBUTION_COLUMNS]


def turns_per_category(
    df: pd.DataFrame, labels: pd.DataFrame, runs: Iterable[str] | None = None
) -> pd.DataFrame:
    """Mean and median action turns of labelled trajectories per model x category."""
    joined, models = _labelled(df, labels, runs)
    if joined.empty:
        return pd.DataFrame(columns=TURNS_CATEGORY_COLUMNS)
    out = (
        joined.groupby(["model", "category"])
        .agg(
            n=("n_turns", "size"),
            mean_turns=("n_turns", "mean"),
            median_turns=("n_turns", "median"),
        )
        .reset_index()
    )
    out["_m"] = out["model"].map({m: i for i, m in enumerate(models)})
    out = out.sort_values(["_m", "category"], kind="stable")
    return out[TURNS_CATEGORY_COLUMNS].reset_index(drop=True)


def provenance_share(labels: pd.DataFrame) -> pd.DataFrame:
    """Share of final labels by provenance, with the coarse source (adjudicated/human/LLM only).

    The four contract provenances are always listed (count 0 if absent), "disputed" when
    present, strongest first; unknown values are appended so nothing is silently dropped.
    """
    prov = labels["provenance"].astype("object").fillna("unknown").astype(str)
    counts = prov.value_counts()
    order = [p for p in PROVENANCES if p in CONTRACT_PROVENANCES or p in counts.index]
    order += sorted(set(counts.index) - set(PROVENANCES))
    out = pd.DataFrame({"provenance": order})
    out["source"] = out["provenance"].map(PROVENANCE_SOURCE).fillna("unknown")
    out["count"] = counts.reindex(order, fill_value=0).to_numpy().astype(int)
    total = int(out["count"].sum())
    out["share"] = out["count"] / total if total else np.nan
    return out[PROVENANCE_COLUMNS]
