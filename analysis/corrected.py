"""Failure shares that count the machine's labels honestly (EHR-Complex Fig. 6, all failures).

The taxonomy table counts either people's labels only (most failures left out) or the machine's
labels as if they were people's. This one counts both, per model: people's labels as they are,
and the machine-labelled failures (LLM-only final labels) corrected by the machine's measured
confusion on the items people checked, a misclassification-corrected estimate:

- the model: the machine's confusion ``C[i, j]`` (the chance it says ``j`` when people would
  say ``i``) is one matrix for every model (a labeller's errors depend on the failure, not on
  which agent made it), measured on every checked item of the workspace, with one
  pseudo-item on the diagonal of each row so a category people never checked is taken at the
  machine's word rather than dropped; each model has its own true distribution ``pi``;
- the estimate is that model's maximum likelihood, by EM: people's labels count as they are,
  each machine label ``j`` is spread over the true categories in proportion to
  ``pi[i] * C[i, j]``, and ``C`` is refitted on the checked items plus those expectations.
  It starts from the moment estimator, the least-squares solution of ``q = C^T p`` on the
  simplex (the matrix-inversion / Rogan-Gladen estimator, clipped to non-negative shares
  summing to one). With the development set's heuristic confusion (docs/evaluation.md) the
  inversion alone had twice the likelihood's error at 100 checks: inverting a confusion whose
  rows each rest on a handful of checks amplifies their noise, while the likelihood also
  reads the unchecked items;
- the share divides by every labelled failure of the model.

The 95% interval is a percentile bootstrap (``DRAWS`` draws, seeded, so the command line and
the page print the same numbers) that resamples the checked items (the confusion), people's
labels and the machine's labels of each model. Where a model has no machine-labelled failure
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
#: EM steps at most (it stops earlier once no share moves by more than 1e-9).
ITERATIONS = 500
#: EM steps of each bootstrap draw, which starts from the point estimate: on the statistics
#: benchmark's 100,000 trajectories (8 models, 2,000 checked items) running them to 500 moved
#: no interval bound by more than 0.0003 and took four times as long (7 s instead of 1.9 s).
BOOTSTRAP_ITERATIONS = 100
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
    """The moment estimate of one model's counts: people's, plus the machine-labelled
    failures spread by the simplex least-squares solution (the likelihood's starting point)."""
    total = float(machine.sum())
    if total <= 0:
        return people.astype(float)
    p = simplex_least_squares(confusion_matrix(confusion_counts), machine / total)
    out: NDArray[np.float64] = people + total * p
    return out


def maximum_likelihood(confusion_counts: NDArray[np.float64], people: NDArray[np.float64],
                       machine: NDArray[np.float64], start: NDArray[np.float64],
                       iterations: int = ITERATIONS, tolerance: float = 1e-9
                       ) -> NDArray[np.float64]:
    """Every model's true distribution by EM (module docstring), for a stack of data sets at
    once (the bootstrap's draws): ``confusion_counts`` (B, K, K) checked items, people's
    true x machine; ``people`` and ``machine`` (B, M, K) each model's people's counts and
    the machine's counts of its unchecked failures; ``start`` (B, M, K) the first ``pi``."""
    k = confusion_counts.shape[-1]
    n = (people + machine).sum(axis=2, keepdims=True)
    pi = start
    confusion = confusion_counts + np.eye(k)
    confusion = confusion / confusion.sum(axis=2, keepdims=True)
    for _ in range(iterations):
        joint = pi[:, :, :, None] * confusion[:, None, :, :]  # B, M, true, machine
        expected = machine[:, :, None, :] * joint / (joint.sum(axis=2, keepdims=True) + 1e-300)
        new_pi = (people + expected.sum(axis=3)) / n
        new_confusion = confusion_counts + np.eye(k) + expected.sum(axis=1)
        new_confusion = new_confusion / new_confusion.sum(axis=2, keepdims=True)
        change = max(float(np.max(np.abs(new_pi - pi))),
                     float(np.max(np.abs(new_confusion - confusion))))
        pi, confusion = new_pi, new_confusion
        if change < tolerance:
            break
    out: NDArray[np.float64] = pi
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
    people = np.zeros((len(models), k))
    machine = np.zeros((len(models), k))
    for model, cat, is_m in zip(joined["model"], joined["category"].map(name), is_machine,
                                strict=True):
        (machine if is_m else people)[models.index(str(model)), index[cat]] += 1
    n = people.sum(axis=1) + machine.sum(axis=1)
    corrected = [m for m in range(len(models)) if machine[m].sum() > 0]
    estimate = np.full((len(models), k), np.nan)
    low = np.full((len(models), k), np.nan)
    high = np.full((len(models), k), np.nan)
    interval = [UNKNOWN] * len(models)
    for m in range(len(models)):
        if machine[m].sum() == 0:
            estimate[m], interval[m] = people[m], WILSON
            low[m], high[m] = wilson_interval(people[m], np.full(k, n[m]))
    if checked and corrected:
        h, u = people[corrected], machine[corrected]
        start = np.array([corrected_counts(h[i], u[i], confusion) / n[m]
                          for i, m in enumerate(corrected)])
        point = maximum_likelihood(confusion[None], h[None], u[None], start[None])[0]
        rng = np.random.default_rng(seed)
        # One resampled confusion per draw, shared by every model: the models' estimates lean
        # on the same checked items, and their intervals say so together.
        boot_confusion = rng.multinomial(checked, confusion.ravel() / checked,
                                         size=draws).reshape(draws, k, k).astype(float)
        boot_people = np.stack([_resample(rng, row, draws) for row in h], axis=1)
        boot_machine = np.stack([_resample(rng, row, draws) for row in u], axis=1)
        shares = maximum_likelihood(boot_confusion, boot_people, boot_machine,
                                    np.broadcast_to(point, (draws, *point.shape)).copy(),
                                    iterations=BOOTSTRAP_ITERATIONS)
        bounds = np.percentile(shares, [2.5, 97.5], axis=0)
        for i, m in enumerate(corrected):
            estimate[m], interval[m] = point[i] * n[m], BOOTSTRAP
            low[m], high[m] = bounds[0, i], bounds[1, i]
    rows: list[dict[str, object]] = []
    for m, model in enumerate(models):
        n_machine = int(machine[m].sum())
        for cat, i in index.items():
            rows.append({
                "model": model, "category": cat, "count": float(estimate[m, i]),
                "n": int(n[m]), "share": float(estimate[m, i]) / n[m] if n[m] else np.nan,
                "ci_low": float(low[m, i]), "ci_high": float(high[m, i]),
                "people": int(people[m, i]), "machine": int(machine[m, i]),
                "machine_share": n_machine / n[m] if n[m] else np.nan,
                "checked": checked, "interval": interval[m],
            })
    return pd.DataFrame(rows, columns=CORRECTED_COLUMNS)


def _resample(rng: np.random.Generator, counts: NDArray[np.float64], draws: int
              ) -> NDArray[np.float64]:
    """``draws`` multinomial resamples of a count vector (zeros stay zeros)."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros((draws, len(counts)))
    out: NDArray[np.float64] = rng.multinomial(total, counts / total, size=draws).astype(float)
    return out


CHART_TITLE = "Failure shares, machine labels corrected (95% interval)"


def corrected_bars(table: pd.DataFrame) -> go.Figure:
    """The taxonomy chart's bars over the corrected shares and their intervals."""
    return failure_bars(table, CHART_TITLE)
