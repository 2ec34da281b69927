"""Clean vs Noise robustness on paired tasks (EHR-RobustGym Table 2).

A pair (``pair_id``) is one clean task and one noise task that differ in a single necessary
condition. Only pairs with both variants present in a run are compared, so the drop reflects
the noise rather than a different task mix. With several rollouts a variant's success is the
mean over its rollouts.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from analysis.success import (
    ALL,
    INTENTS,
    normalise_task_fields,
    ordered_values,
    run_order,
    select_runs,
)

NOISE_TYPES: tuple[str, ...] = ("record", "value", "query")
ROBUSTNESS_COLUMNS = ["run", "model", "by", "group", "n_pairs", "clean", "noise", "drop"]


def paired_outcomes(df: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per run x pair with both variants: clean / noise success, intent, noise type."""
    sub = select_runs(df, runs)
    cols = ["run", "model", "pair_id", "intent", "variant", "noise_type", "clean", "noise"]
    if sub.empty or "pair_id" not in sub.columns:
        return pd.DataFrame(columns=cols)
    variant = sub["variant"].astype("object").str.lower()
    mask = sub["pair_id"].notna() & variant.isin(["clean", "noise"])
    part = sub[mask]
    base = normalise_task_fields(part)
    base["pair_id"] = part["pair_id"].astype(str)
    base["variant"] = variant[mask]
    base["noise_type"] = part["noise_type"].astype("object") if "noise_type" in part else None

    rates = (
        base.groupby(["run", "model", "pair_id", "variant"], sort=False)["success"]
        .mean()
        .unstack("variant")
        .reindex(columns=["clean", "noise"])
        .dropna()
    )
    if rates.empty:
        return pd.DataFrame(columns=[*cols[:4], "noise_type", "clean", "noise"])
    # The pair's intent is the clean task's (the paper groups pairs by the clean request); the
    # noise type is only defined on the noise task. Fall back to the other variant if missing.
    first = base.groupby(["run", "model", "pair_id", "variant"], sort=False)[
        ["intent", "noise_type"]
    ].first()
    clean_meta = first.xs("clean", level="variant")
    noise_meta = first.xs("noise", level="variant")
    rates["intent"] = clean_meta["intent"].reindex(rates.index)
    rates["intent"] = rates["intent"].fillna(noise_meta["intent"].reindex(rates.index))
    nt = noise_meta["noise_type"].reindex(rates.index)
    nt = nt.fillna(clean_meta["noise_type"].reindex(rates.index))
    rates["noise_type"] = nt.fillna("unknown").astype(str).str.lower()
    out = rates.reset_index()
    out.columns.name = None
    return out[["run", "model", "pair_id", "intent", "noise_type", "clean", "noise"]]


def robustness(df: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """Clean vs Noise success per run, by intent, by noise type and pooled.

    Columns ``run, model, by, group, n_pairs, clean, noise, drop``: ``by`` is ``"intent"``,
    ``"noise_type"`` or ``"all"`` (pooled over all pairs, like the paper's Avg.), and
    ``drop = clean - noise``.
    """
    pairs = paired_outcomes(df, runs)
    if pairs.empty:
        return pd.DataFrame(columns=ROBUSTNESS_COLUMNS)
    views = pd.concat(
        [
            pairs.assign(by="all", group=ALL),
            pairs.assign(by="intent", group=pairs["intent"]),
            pairs.assign(by="noise_type", group=pairs["noise_type"]),
        ],
        ignore_index=True,
    )
    out = (
        views.groupby(["run", "model", "by", "group"], sort=False)
        .agg(n_pairs=("pair_id", "size"), clean=("clean", "mean"), noise=("noise", "mean"))
        .reset_index()
    )
    # Equal rates must print as 0.000, never "-0.000": drop float noise and the sign of zero.
    out["drop"] = (out["clean"] - out["noise"]).round(12) + 0.0

    intents = ordered_values(pairs["intent"], INTENTS)
    noise_types = ordered_values(pairs["noise_type"], NOISE_TYPES)
    group_rank = {v: i for i, v in enumerate(intents)}
    group_rank.update({v: i for i, v in enumerate(noise_types)})
    order = {r: i for i, r in enumerate(run_order(pairs, runs))}
    by_rank = {"all": 0, "intent": 1, "noise_type": 2}
    out = out.assign(
        _r=out["run"].map(order),
        _b=out["by"].map(by_rank),
        _g=out["group"].map(group_rank).fillna(np.inf),
    ).sort_values(["_r", "model", "_b", "_g"], kind="stable")
    return out[ROBUSTNESS_COLUMNS].reset_index(drop=True)


def robustness_wide(rob: pd.DataFrame, by: str = "intent") -> pd.DataFrame:
    """Paper layout: one row per run, ``<group> clean`` / ``<group> noise`` columns plus Avg."""
    sel = rob[rob["by"].isin([by, "all"])]
    if sel.empty:
        return pd.DataFrame(columns=["run", "model"])
    clean = sel.pivot_table(index=["run", "model"], columns="group", values="clean", sort=False)
    noise = sel.pivot_table(index=["run", "model"], columns="group", values="noise", sort=False)
    groups = list(dict.fromkeys(sel["group"]))
    cols: dict[str, pd.Series] = {}
    for g in [*[x for x in groups if x != ALL], ALL]:
        cols[f"{g} clean"] = clean[g]
        cols[f"{g} noise"] = noise[g]
    out = pd.DataFrame(cols).reset_index()
    out.columns.name = None
    return out
