"""Agreement between two raters: Cohen's kappa and the coefficients read beside it.

Raw agreement, Cohen's kappa with its asymptotic standard error and 95% interval (statsmodels),
the confusion matrix, Brennan-Prediger/PABAK, Gwet's AC1, the full 2x2 summary
(`binary_agreement`), kappa for every pair of raters (`pairwise_cohens`) and an automatic
labeller scored against the human labels (`labeller_vs_human`). The note explaining a low
kappa is worded in `labeling.agreement.explain`.

Table convention: ``table[i][j]`` counts items that rater A put in category ``i`` and rater B in
category ``j``. For the binary helpers the first category is the "positive" one, so a 2x2 table
is ``[[a, b], [c, d]]`` with ``a`` = both positive and ``d`` = both negative.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.metrics import precision_recall_fscore_support
from statsmodels.stats.inter_rater import cohens_kappa as _sm_cohens_kappa

from labeling.agreement.explain import kappa_paradox_note

__all__ = [
    "OVERALL_ROW",
    "BinaryAgreement",
    "KappaResult",
    "PairResult",
    "binary_agreement",
    "brennan_prediger",
    "cohens_kappa",
    "cohens_kappa_from_labels",
    "confusion_matrix",
    "gwet_ac1",
    "labeller_vs_human",
    "pabak",
    "pairwise_cohens",
    "raw_agreement",
]

_Item = TypeVar("_Item", bound=Hashable)
_Label = TypeVar("_Label", bound=Hashable)

#: Two-sided 95% normal quantile used for every confidence interval in this module.
_Z95 = 1.959963984540054

#: Label of the summary row appended by :func:`labeller_vs_human`.
OVERALL_ROW = "(overall)"


@dataclass(frozen=True)
class KappaResult:
    """Cohen's kappa with its asymptotic standard error and a 95% Wald interval.

    ``kappa`` is NaN when it is undefined (both raters used a single, identical category, so
    chance agreement is 1). The interval is clipped to [-1, 1], the range kappa can take.
    """

    kappa: float
    ci_low: float
    ci_high: float
    ase: float
    n: int


@dataclass(frozen=True)
class BinaryAgreement:
    """Agreement between two raters on a two-category label (e.g. valid / invalid)."""

    n: int
    n_agree: int
    raw_agreement: float
    expected_agreement: float
    cohens_kappa: KappaResult
    pabak: float
    prevalence_index: float
    bias_index: float
    gwet_ac1: float
    positive_agreement: float
    negative_agreement: float
    table: tuple[tuple[int, int], tuple[int, int]]
    labels: tuple[str, str]
    kappa_paradox_note: str | None


@dataclass(frozen=True)
class PairResult:
    """Cohen's kappa for one pair of raters over the items both of them rated."""

    rater_a: str
    rater_b: str
    n_items: int
    n_agree: int
    raw_agreement: float | None
    kappa: KappaResult | None


# --------------------------------------------------------------------------------------------
# helpers


def _as_square_table(table: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(table, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
        raise ValueError(f"expected a square contingency table with k >= 2, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("contingency table counts must be finite and non-negative")
    if arr.sum() <= 0:
        raise ValueError("contingency table is empty (no rated items)")
    return arr


def _ordered_categories(values: Iterable[Hashable]) -> list[Hashable]:
    """Distinct values in a stable order: sorted when comparable, else by text form."""
    distinct = list(dict.fromkeys(values))
    try:
        return sorted(distinct)  # type: ignore[type-var]
    except TypeError:
        return sorted(distinct, key=repr)


def _is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


# --------------------------------------------------------------------------------------------
# Cohen's kappa and friends


def raw_agreement(table: ArrayLike) -> float:
    """Observed proportion of agreement p_o (the diagonal share)."""
    arr = _as_square_table(table)
    return float(np.trace(arr) / arr.sum())


def _expected_agreement(arr: NDArray[np.float64]) -> float:
    n = arr.sum()
    return float(np.dot(arr.sum(axis=1), arr.sum(axis=0)) / (n * n))


def cohens_kappa(table: ArrayLike) -> KappaResult:
    """Unweighted Cohen's kappa from a k x k contingency table, with ASE and 95% CI.

    The estimate and the asymptotic standard error (Fleiss, Cohen & Everitt 1969) come from
    statsmodels; the interval is kappa +/- 1.96 ASE.
    """
    arr = _as_square_table(table)
    n = round(float(arr.sum()))
    # statsmodels divides by (1 - p_e); when both raters used one identical category the
    # coefficient is undefined, so report NaN rather than a division warning.
    if math.isclose(_expected_agreement(arr), 1.0):
        nan = float("nan")
        return KappaResult(kappa=nan, ci_low=nan, ci_high=nan, ase=nan, n=n)
    # When one rater is constant kappa is identically 0 and its variance is 0 analytically;
    # statsmodels can land a hair below zero and take a square root of it, so clamp instead.
    with np.errstate(invalid="ignore"):
        res = _sm_cohens_kappa(arr, return_results=True)
    kappa = float(res.kappa)
    ase = math.sqrt(max(float(res.var_kappa), 0.0))
    return KappaResult(
        kappa=kappa,
        ci_low=max(-1.0, kappa - _Z95 * ase),
        ci_high=min(1.0, kappa + _Z95 * ase),
        ase=ase,
        n=n,
    )


def confusion_matrix(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    categories: Sequence[Hashable] | None = None,
) -> pd.DataFrame:
    """Cross-tabulate two raters' labels: rows are rater A's categories, columns rater B's.

    Every category in ``categories`` gets a row and a column even when unused, so tables from
    different pairs line up. Labels outside ``categories`` raise ``ValueError``.
    """
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length: {len(a)} vs {len(b)}")
    cats = _ordered_categories([*a, *b]) if categories is None else list(categories)
    if len(set(cats)) != len(cats):
        raise ValueError("categories contain duplicates")
    index = {c: i for i, c in enumerate(cats)}
    unknown = {x for x in (*a, *b) if x not in index}
    if unknown:
        raise ValueError(f"labels not among the categories: {sorted(map(repr, unknown))}")
    counts = np.zeros((len(cats), len(cats)), dtype=np.int64)
    if len(a):
        np.add.at(counts, ([index[x] for x in a], [index[y] for y in b]), 1)
    return pd.DataFrame(counts, index=pd.Index(cats, name="rater_a"),
                        columns=pd.Index(cats, name="rater_b"))


def cohens_kappa_from_labels(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    categories: Sequence[Hashable] | None = None,
) -> KappaResult:
    """Cohen's kappa from two aligned label sequences (item i rated ``a[i]`` and ``b[i]``)."""
    cm = confusion_matrix(a, b, categories)
    if len(cm) < 2:
        # A single category cannot carry disagreement; pad so the table is 2x2 and the
        # undefined-kappa path reports NaN.
        cm = cm.reindex(index=[*cm.index, "__other__"], columns=[*cm.columns, "__other__"],
                        fill_value=0)
    return cohens_kappa(cm.to_numpy())


def brennan_prediger(table: ArrayLike) -> float:
    """Brennan-Prediger coefficient: chance agreement fixed at 1/k for k categories.

    For two categories this equals PABAK = 2 p_o - 1.
    """
    arr = _as_square_table(table)
    k = arr.shape[0]
    p_o = float(np.trace(arr) / arr.sum())
    return (k * p_o - 1.0) / (k - 1.0)


def pabak(table: ArrayLike) -> float:
    """Prevalence-adjusted bias-adjusted kappa (Byrt, Bishop & Carlin 1993).

    Defined as 2 p_o - 1 for two categories; for k categories the natural generalisation is the
    Brennan-Prediger coefficient (k p_o - 1) / (k - 1), which is what this returns.
    """
    return brennan_prediger(table)


def gwet_ac1(table: ArrayLike) -> float:
    """Gwet's AC1 for two raters and k nominal categories.

    Chance agreement is ``sum_q pi_q (1 - pi_q) / (k - 1)`` with ``pi_q`` the mean of the two
    raters' marginal shares for category q; unlike kappa it shrinks, not grows, as one category
    comes to dominate, which is why AC1 stays high under skewed prevalence.
    """
    arr = _as_square_table(table)
    n = arr.sum()
    k = arr.shape[0]
    p_o = float(np.trace(arr) / n)
    pi = (arr.sum(axis=0) + arr.sum(axis=1)) / (2.0 * n)
    p_e = float(np.sum(pi * (1.0 - pi)) / (k - 1))
    return (p_o - p_e) / (1.0 - p_e)


def binary_agreement(
    table2x2: ArrayLike, labels: tuple[str, str] = ("positive", "negative")
) -> BinaryAgreement:
    """Full agreement summary for a 2x2 table ``[[a, b], [c, d]]``.

    ``a`` = both raters chose ``labels[0]``, ``d`` = both chose ``labels[1]``, ``b`` = A chose
    ``labels[0]`` and B ``labels[1]``, ``c`` the reverse. Prevalence and bias indices follow
    Byrt et al. (1993): PI = |a - d| / n, BI = |b - c| / n. Positive and negative specific
    agreement (2a / (2a + b + c), 2d / (2d + b + c)) are included because together they explain
    a low kappa better than any single number.
    """
    arr = _as_square_table(table2x2)
    if arr.shape != (2, 2):
        raise ValueError(f"binary_agreement needs a 2x2 table, got shape {arr.shape}")
    a, b = arr[0]
    c, d = arr[1]
    n = float(arr.sum())
    p_o = (a + d) / n
    p_e = _expected_agreement(arr)
    kappa = cohens_kappa(arr)
    pabak_value = 2.0 * p_o - 1.0
    pi = abs(a - d) / n
    bi = abs(b - c) / n
    ac1 = gwet_ac1(arr)
    nan = float("nan")
    pos = 2 * a / (2 * a + b + c) if (2 * a + b + c) > 0 else nan
    neg = 2 * d / (2 * d + b + c) if (2 * d + b + c) > 0 else nan
    note = kappa_paradox_note(p_o, kappa.kappa, pi, labels, arr, pabak_value, ac1, p_e)
    ints = tuple(tuple(round(float(x)) for x in row) for row in arr)
    return BinaryAgreement(
        n=round(n),
        n_agree=round(float(a + d)),
        raw_agreement=float(p_o),
        expected_agreement=p_e,
        cohens_kappa=kappa,
        pabak=float(pabak_value),
        prevalence_index=float(pi),
        bias_index=float(bi),
        gwet_ac1=float(ac1),
        positive_agreement=float(pos),
        negative_agreement=float(neg),
        table=(ints[0], ints[1]),  # type: ignore[arg-type]
        labels=labels,
        kappa_paradox_note=note,
    )


# --------------------------------------------------------------------------------------------
# every pair of raters


def pairwise_cohens(
    labels_by_rater: Mapping[str, Mapping[_Item, _Label]],
) -> list[PairResult]:
    """Cohen's kappa for every pair of raters (name order) over the items both rated.

    Categories are the union over all raters, so every pair is scored on the same scale. Pairs
    with no shared item are still listed, with ``n_items == 0`` and no kappa.
    """
    categories = _ordered_categories(
        lab for ratings in labels_by_rater.values() for lab in ratings.values()
        if not _is_missing(lab)
    )
    results: list[PairResult] = []
    for ra, rb in combinations(sorted(labels_by_rater), 2):
        la, lb = labels_by_rater[ra], labels_by_rater[rb]
        shared = [
            item for item in la
            if item in lb and not _is_missing(la[item]) and not _is_missing(lb[item])
        ]
        if not shared:
            results.append(PairResult(ra, rb, 0, 0, None, None))
            continue
        a = [la[i] for i in shared]
        b = [lb[i] for i in shared]
        n_agree = sum(x == y for x, y in zip(a, b, strict=True))
        results.append(PairResult(
            rater_a=ra,
            rater_b=rb,
            n_items=len(shared),
            n_agree=n_agree,
            raw_agreement=n_agree / len(shared),
            kappa=cohens_kappa_from_labels(a, b, categories),
        ))
    return results


# --------------------------------------------------------------------------------------------
# pre-labeller vs people


def labeller_vs_human(
    pred: Sequence[str], human: Sequence[str], categories: Sequence[str]
) -> pd.DataFrame:
    """How well an automatic labeller matches the human (final) labels, per category.

    One row per category (``support`` = human count, ``predicted`` = labeller count, precision,
    recall, F1, one-vs-rest Cohen's kappa, and ``override_rate`` = share of the labeller's
    choices of that category that the human changed, i.e. 1 - precision), then an
    ``OVERALL_ROW`` with accuracy in the precision/recall/F1 columns, the multi-class kappa and
    the overall override rate (share of items where human != labeller). The overall kappa and
    override rate are also in ``df.attrs``. Undefined ratios are NaN.
    """
    if len(pred) != len(human):
        raise ValueError(f"pred and human differ in length: {len(pred)} vs {len(human)}")
    if not pred:
        raise ValueError("no items to compare")
    cats = list(categories)
    unknown = (set(pred) | set(human)) - set(cats)
    if unknown:
        raise ValueError(f"labels not among the categories: {sorted(unknown)}")
    precision, recall, f1, support = precision_recall_fscore_support(
        human, pred, labels=cats, zero_division=np.nan
    )
    predicted = pd.Series(list(pred)).value_counts().reindex(cats, fill_value=0)
    rows: list[dict[str, Any]] = []
    for i, cat in enumerate(cats):
        a_bin = ["y" if x == cat else "n" for x in pred]
        h_bin = ["y" if x == cat else "n" for x in human]
        k = cohens_kappa_from_labels(h_bin, a_bin, ["y", "n"]).kappa
        rows.append({
            "category": cat,
            "support": int(support[i]),
            "predicted": int(predicted[cat]),
            "precision": float(precision[i]),
            "recall": float(recall[i]),
            "f1": float(f1[i]),
            "kappa": k,
            "override_rate": 1.0 - float(precision[i]),
        })
    n = len(pred)
    n_same = sum(p == h for p, h in zip(pred, human, strict=True))
    accuracy = n_same / n
    overall_kappa = cohens_kappa_from_labels(human, pred, cats).kappa
    override = 1.0 - accuracy
    rows.append({
        "category": OVERALL_ROW,
        "support": n,
        "predicted": n,
        "precision": accuracy,
        "recall": accuracy,
        "f1": accuracy,
        "kappa": overall_kappa,
        "override_rate": override,
    })
    df = pd.DataFrame(rows)
    df.attrs["kappa"] = overall_kappa
    df.attrs["override_rate"] = override
    df.attrs["n"] = n
    return df
