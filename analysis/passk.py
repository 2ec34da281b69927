"""Pass^k (consistency) and Pass@k (coverage) over repeated rollouts (EHR-Complex App. H).

For a task with ``n`` rollouts of which ``c`` succeeded, the unbiased estimators are

* Pass^k = C(c, k) / C(n, k)       (probability that k rollouts drawn without replacement all pass)
* Pass@k = 1 - C(n - c, k) / C(n, k) (probability that at least one of them passes)

averaged over the tasks with ``n >= k``; tasks with fewer rollouts cannot answer the question
for that ``k`` and are excluded rather than padded.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import comb
from typing import Any

import numpy as np
import pandas as pd

from analysis.success import ALL, normalise_task_fields, run_order, select_runs

PASSK_COLUMNS = [
    "run",
    "scope",
    "intent",
    "k",
    "pass_hat_k",
    "pass_at_k",
    "n_tasks",
    "temperature",
]


def comb_table(n_max: int, k_max: int) -> np.ndarray:
    """``table[m, k] = C(m, k)`` for m <= n_max, k <= k_max, from exact integer ``math.comb``.

    Rollout counts are small integers, so a lookup table turns the per-task binomials into
    numpy fancy indexing instead of a Python call per task. Values stay exact as floats up to
    2**53, far beyond any realistic rollout count.
    """
    table = np.zeros((n_max + 1, k_max + 1), dtype=float)
    for m in range(n_max + 1):
        for k in range(min(m, k_max) + 1):
            table[m, k] = float(comb(m, k))
    return table


def task_outcomes(df: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per run x task: ``n`` rollouts, ``c`` successes, the task's scope and intent."""
    sub = normalise_task_fields(select_runs(df, runs))
    grouped = sub.groupby(["run", "task_id"], sort=False)
    tasks = grouped.agg(
        # Rollouts with an outcome: an undecided one is unknown, not a failure (left out, as
        # from every rate).
        n=("success", "count"),
        c=("success", "sum"),
        scope=("scope", "first"),
        intent=("intent", "first"),
    ).reset_index()
    tasks["n"] = tasks["n"].astype(int)
    tasks["c"] = tasks["c"].astype(int)
    return tasks


def pass_k_per_task(n: np.ndarray, c: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-task (Pass^k, Pass@k); NaN where ``n < k``."""
    n = np.asarray(n, dtype=int)
    c = np.asarray(c, dtype=int)
    if n.size == 0:
        return np.array([], dtype=float), np.array([], dtype=float)
    table = comb_table(int(n.max()), k)
    valid = n >= k
    denom = np.where(valid, table[n, k], np.nan)
    pass_hat = table[c, k] / denom
    pass_at = 1.0 - table[n - c, k] / denom
    return pass_hat, pass_at


def _temperatures(df: pd.DataFrame) -> pd.Series:
    """Per-run temperature (first non-null value; a run is sampled at one temperature)."""
    if "temperature" not in df.columns or df.empty:
        return pd.Series(dtype=float)
    temps = pd.to_numeric(df["temperature"], errors="coerce")
    return temps.groupby(df["run"].astype(str), sort=False).first()


def pass_k(df: pd.DataFrame, runs: Iterable[str] | None = None, k_max: int = 4) -> pd.DataFrame:
    """Pass^k and Pass@k for k = 1..min(k_max, most rollouts of the run).

    Rows are per run: overall (scope = intent = "all"), per scope (intent "all") and per intent
    (scope "all"). ``n_tasks`` is the number of tasks with at least k rollouts.
    """
    sub = select_runs(df, runs)
    tasks = task_outcomes(sub)
    if tasks.empty or k_max < 1:
        return pd.DataFrame(columns=PASSK_COLUMNS)

    run_max = tasks.groupby("run", sort=False)["n"].transform("max")
    frames = []
    for k in range(1, min(k_max, int(tasks["n"].max())) + 1):
        # Each run only reports k up to its own largest rollout count, so a single-rollout run
        # yields Pass^1/Pass@1 only rather than empty rows for k >= 2.
        keep = (tasks["n"] >= k) & (run_max >= k)
        part = tasks[keep]
        hat, at = pass_k_per_task(part["n"].to_numpy(), part["c"].to_numpy(), k)
        frames.append(part[["run", "scope", "intent"]].assign(k=k, pass_hat_k=hat, pass_at_k=at))
    per_task = pd.concat(frames, ignore_index=True)

    # Stack the three views (overall, by scope, by intent) and aggregate them in one groupby.
    views = pd.concat(
        [
            per_task.assign(scope=ALL, intent=ALL),
            per_task.assign(intent=ALL),
            per_task.assign(scope=ALL),
        ],
        ignore_index=True,
    )
    out = (
        views.groupby(["run", "scope", "intent", "k"], sort=False)
        .agg(
            pass_hat_k=("pass_hat_k", "mean"),
            pass_at_k=("pass_at_k", "mean"),
            n_tasks=("pass_hat_k", "size"),
        )
        .reset_index()
    )
    out["temperature"] = out["run"].map(_temperatures(sub)).astype(float)

    order = {r: i for i, r in enumerate(run_order(sub, runs))}
    view_rank = np.where(
        (out["scope"] == ALL) & (out["intent"] == ALL), 0, np.where(out["intent"] == ALL, 1, 2)
    )
    out = out.assign(_r=out["run"].map(order), _v=view_rank).sort_values(
        ["_r", "_v", "scope", "intent", "k"], kind="stable"
    )
    return out[PASSK_COLUMNS].reset_index(drop=True)


def pass_k_wide(passk: pd.DataFrame, scope: str = ALL, intent: str = ALL) -> pd.DataFrame:
    """Paper layout (Tables 22-26): one row per run, Pass^k and Pass@k columns per k."""
    sel = passk[(passk["scope"] == scope) & (passk["intent"] == intent)]
    if sel.empty:
        return pd.DataFrame(columns=["run"])
    hat = sel.pivot_table(index="run", columns="k", values="pass_hat_k", sort=False)
    at = sel.pivot_table(index="run", columns="k", values="pass_at_k", sort=False)
    hat.columns = [f"pass_hat_{k}" for k in hat.columns]
    at.columns = [f"pass_at_{k}" for k in at.columns]
    return hat.join(at).reset_index()


#: Sampling temperatures of the paper's Pass^k (consistency) and Pass@k (coverage) runs.
PASS_HAT_TEMPERATURE = 0.0
PASS_AT_TEMPERATURE = 0.6


def _run_at(temps: pd.DataFrame, model: str, temperature: float) -> str | None:
    sel = temps[(temps["model"] == model) & np.isclose(temps["temperature"], temperature)]
    return str(sel["run"].iloc[0]) if len(sel) else None


def pass_k_paper(
    df: pd.DataFrame,
    runs: Iterable[str] | None = None,
    k_max: int = 4,
    hat_temperature: float = PASS_HAT_TEMPERATURE,
    at_temperature: float = PASS_AT_TEMPERATURE,
) -> pd.DataFrame:
    """EHR-Complex Tables 22-26: one row per model and view (overall, each scope, each intent)
    with Pass^k from the model's ``hat_temperature`` run and Pass@k from its ``at_temperature``
    run (the first such run in run order), both built with ``pass_k_wide``.

    Columns: ``model, scope, intent, pass_hat_run, pass_at_run, pass_hat_1..k, pass_at_1..k``;
    a side whose run is missing is NaN.
    """
    sub = select_runs(df, runs)
    long = pass_k(sub, runs, k_max)
    ks = list(range(1, k_max + 1))
    hat_cols = [f"pass_hat_{k}" for k in ks]
    at_cols = [f"pass_at_{k}" for k in ks]
    columns = ["model", "scope", "intent", "pass_hat_run", "pass_at_run", *hat_cols, *at_cols]
    if long.empty:
        return pd.DataFrame(columns=columns)
    base = normalise_task_fields(sub)
    order = run_order(sub, runs)
    temps = (
        pd.DataFrame({"run": base["run"], "model": base["model"]})
        .drop_duplicates("run")
        .assign(temperature=lambda f: f["run"].map(_temperatures(sub)).astype(float))
    )
    temps = temps.set_index("run").reindex([r for r in order if r in set(temps["run"])])
    temps = temps.reset_index()
    views = long[["scope", "intent"]].drop_duplicates()
    rows = []
    for model in dict.fromkeys(temps["model"]):
        hat_run = _run_at(temps, model, hat_temperature)
        at_run = _run_at(temps, model, at_temperature)
        if hat_run is None and at_run is None:
            continue
        for scope, intent in views.itertuples(index=False):
            wide = pass_k_wide(long, scope=scope, intent=intent).set_index("run")
            row: dict[str, object] = {"model": model, "scope": scope, "intent": intent,
                                      "pass_hat_run": hat_run, "pass_at_run": at_run}
            for k in ks:
                row[f"pass_hat_{k}"] = _cell(wide, hat_run, f"pass_hat_{k}")
                row[f"pass_at_{k}"] = _cell(wide, at_run, f"pass_at_{k}")
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _cell(wide: pd.DataFrame, run: str | None, column: str) -> float:
    if run is None or run not in wide.index or column not in wide.columns:
        return float("nan")
    value: Any = wide.at[run, column]
    return float(value)
