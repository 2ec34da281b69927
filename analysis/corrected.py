"""Failure shares that count the machine's labels honestly (EHR-Complex Fig. 6, all failures).

The taxonomy table counts either people's labels only (most failures left out) or the machine's
labels as if they were people's. This one counts both, per model: people's labels as they are,
and the machine-labelled failures (LLM-only final labels) corrected by the machine's measured
confusion on the items people checked, a misclassification-corrected estimate:

- ``C[i, j]``, the share of checked items people put in category ``i`` that the machine put in
  ``j``, measured on every checked item of the workspace (the labeller's errors do not depend
  on which runs are selected), with one pseudo-item on the diagonal of each row so a category
  people never checked is taken at the machine's word rather than dropped;
- the machine's observed distribution ``q`` over a model's machine-labelled failures is
  explained as ``q = C^T p``; ``p``, the estimated true distribution of those failures, is the
  least-squares solution on the simplex (non-negative, summing to one), which is the
  matrix-inversion (Rogan-Gladen) estimator wherever that one lands on the simplex, and its
  clipped version where sampling noise pushes it off;
- the model's estimated count per category is people's count plus the machine-labelled
  failures times ``p``; the share divides by every labelled failure of the model.

The 95% interval is a percentile bootstrap (``DRAWS`` draws, seeded, so the command line and
the page print the same numbers) that resamples the checked items (the confusion), people's
labels and the machine's labels of the model. Where a model has no machine-labelled failure
the estimate is people's share with its Wilson interval, as in the taxonomy table. Where it
has machine labels but nobody has checked any item, the machine's error is unmeasured and the
share is unknown (NaN), never the machine's raw count. The correction assumes the checked items
show the machine's errors as they are on the unchecked ones: items routed to people for low
confidence make it err more often than it does on the rest, so a checked set made only of
those overstates the correction; spot checks of confident items are what keep it honest.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from numpy.typing import NDArray
from scipy.optimize import nnls

from analysis.charts import failure_bars
from analysis.failures import category_display_name, wilson_interval
from analysis.success import normalise_task_fields, run_order, select_runs
from labeling.store.records import HUMAN_PROVENANCES, Provenance

CORRECTED_COLUMNS = ["model", "category", "count", "n", "share", "ci_low", "ci_high", "people",
                     "machine", "machine_share", "checked", "interval"]
#: The column ``with_machine_category`` adds to the final labels: the machine's category on
#: a people-labelled item (from the labeller pairs), what the confusion is measured on.
MACHINE = "machine_category"
DRAWS = 1000
SEED = 0
# Weight of the sum-to-one row in the constrained least squares: large against the unit-scale
# residuals, so the solution sums to one within rounding.
_SIMPLEX_WEIGHT = 1_000.0
WILSON, BOOTSTRAP, UNKNOWN = "wilson", "bootstrap", "unknown: no checked items"


def with_machine_category(labels: pd.DataFrame | None, pairs: pd.DataFrame | None
                          ) -> pd.DataFrame | None:
    """Every final label with the machine's category beside it where people checked the
    item (``pairs``: trajectory_id, llm_category, human_category)."""
    if labels is None:
        return None
    out = labels.copy()
    if pairs is None or pairs.empty or "llm_category" not in pairs.columns:
        out[MACHINE] = None
        return out
    machine = (pairs.dropna(subset=["llm_category"])
               .drop_duplicates("trajectory_id", keep="last")
               .set_index(pairs["trajectory_id"].astype(str).rename("tid"))["llm_category"])
    out[MACHINE] = out["trajectory_id"].astype(str).map(machine.to_dict())
    return out


def simplex_least_squares(confusion: NDArray[np.float64], observed: NDArray[np.float64]
                          ) -> NDArray[np.float64]:
    """``p`` >= 0 summing to one that minimises ``|confusion.T @ p - observed|``."""
    k = confusion.shape[0]
    a = np.vstack([confusion.T, np.full((1, k), _SIMPLEX_WEIGHT)])
    b = np.concatenate([observed, [_SIMPLEX_WEIGHT]])
    p, _ = nnls(a, b)
    total = float(p.sum())
    result: NDArray[np.float64] = p / total if total > 0 else np.full(k, 1.0 / k)
    return result


def confusion_matrix(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-normalised confusion (people's category -> the machine's) from counts, with one
    pseudo-item on each row's diagonal (see the module docstring)."""
    smoothed = counts + np.eye(counts.shape[0])
    out: NDArray[np.float64] = smoothed / smoothed.sum(axis=1, keepdims=True)
    return out


def corrected_counts(people: NDArray[np.float64], machine: NDArray[np.float64],
                     confusion_counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """Estimated count per category: people's, plus the machine-labelled failures spread by
    the corrected distribution."""
    total = float(machine.sum())
    if total <= 0:
        return people.astype(float)
    p = simplex_least_squares(confusion_matrix(confusion_counts), machine / total)
    out: NDArray[np.float64] = people + total * p
    return out


def _joined(df: pd.DataFrame, labels: pd.DataFrame, runs: Iterable[str] | None
            ) -> tuple[pd.DataFrame, list[str]]:
    """Labels with a category joined to their selected trajectories, and the models in the
    order of their first run (as the taxonomy table orders them)."""
    sub = select_runs(df, runs)
    base = normalise_task_fields(sub)
    base["id"] = sub["id"].astype(str)
    lab = labels[labels["category"].notna()].copy()
    lab["trajectory_id"] = lab["trajectory_id"].astype(str)
    lab = lab.drop_duplicates("trajectory_id")[["trajectory_id", "category", "provenance"]]
    joined = base.merge(lab, left_on="id", right_on="trajectory_id", how="inner")
    rank = {r: i for i, r in enumerate(run_order(sub, runs))}
    first_run = joined["run"].map(rank).groupby(joined["model"], sort=False).min()
    return joined, [str(m) for m in first_run.sort_values(kind="stable").index]


def corrected_distribution(df: pd.DataFrame, labels: pd.DataFrame | None,
                           runs: Iterable[str] | None = None, *, draws: int = DRAWS,
                           seed: int = SEED) -> pd.DataFrame:
    """Per model x category: the estimated count and share over people's and the machine's
    labels, its 95% interval, and how much of it is machine-labelled (module docstring).
    ``labels``: every final label, with ``MACHINE`` (``with_machine_category``)."""
    if labels is None or labels.empty:
        return pd.DataFrame(columns=CORRECTED_COLUMNS)
    joined, models = _joined(df, labels, runs)
    if joined.empty:
        return pd.DataFrame(columns=CORRECTED_COLUMNS)
    name = category_display_name
    human = labels["provenance"].isin(HUMAN_PROVENANCES) & labels["category"].notna()
    checks = labels[human & labels.get(MACHINE, pd.Series(None, index=labels.index)).notna()]
    freq = joined["category"].map(name).value_counts()
    extra = {name(str(c)) for c in checks[MACHINE]} | {name(str(c)) for c in checks["category"]}
    categories = sorted(set(freq.index) | extra,
                        key=lambda c: (-int(freq.get(c, 0)), str(c)))
    index = {c: i for i, c in enumerate(categories)}
    k = len(categories)
    confusion = np.zeros((k, k))
    for truth, said in zip(checks["category"], checks[MACHINE], strict=True):
        confusion[index[name(str(truth))], index[name(str(said))]] += 1
    checked = int(confusion.sum())
    is_machine = joined["provenance"] == Provenance.LLM_ONLY.value
    rng = np.random.default_rng(seed)
    # One resampled confusion per draw, shared by every model: the models' estimates lean on
    # the same checked items, and their intervals should say so together.
    boot_confusions = (rng.multinomial(checked, confusion.ravel() / checked, size=draws)
                       .reshape(draws, k, k).astype(float) if checked else None)
    rows: list[dict[str, object]] = []
    for model in models:
        part = joined[joined["model"] == model]
        people = np.zeros(k)
        machine = np.zeros(k)
        for cat, is_m in zip(part["category"].map(name), is_machine[part.index], strict=True):
            (machine if is_m else people)[index[cat]] += 1
        n_people, n_machine = int(people.sum()), int(machine.sum())
        n = n_people + n_machine
        if n_machine == 0:
            estimate, interval = people, WILSON
            low, high = wilson_interval(people, np.full(k, n))
        elif boot_confusions is None:
            estimate, interval = np.full(k, np.nan), UNKNOWN
            low = high = np.full(k, np.nan)
        else:
            estimate, interval = corrected_counts(people, machine, confusion), BOOTSTRAP
            people_draws = (rng.multinomial(n_people, people / n_people, size=draws)
                            if n_people else np.zeros((draws, k)))
            machine_draws = rng.multinomial(n_machine, machine / n_machine, size=draws)
            shares = np.array([
                corrected_counts(people_draws[b], machine_draws[b].astype(float),
                                 boot_confusions[b]) / n for b in range(draws)])
            low, high = np.percentile(shares, [2.5, 97.5], axis=0)
        for cat, i in index.items():
            rows.append({
                "model": model, "category": cat, "count": float(estimate[i]), "n": n,
                "share": float(estimate[i]) / n if n else np.nan,
                "ci_low": float(low[i]), "ci_high": float(high[i]),
                "people": int(people[i]), "machine": int(machine[i]),
                "machine_share": n_machine / n if n else np.nan,
                "checked": checked, "interval": interval,
            })
    return pd.DataFrame(rows, columns=CORRECTED_COLUMNS)


CHART_TITLE = "Failure shares, machine labels corrected (95% interval)"


def corrected_bars(table: pd.DataFrame) -> go.Figure:
    """The taxonomy chart's bars over the corrected shares and their intervals."""
    return failure_bars(table, CHART_TITLE)
