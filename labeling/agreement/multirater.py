"""Agreement among any number of raters: Fleiss' kappa and Krippendorff's alpha (nominal).

Fleiss' kappa comes from statsmodels and Krippendorff's alpha from the `krippendorff` package;
this module only validates and shapes their inputs. Krippendorff's alpha tolerates missing
ratings, Fleiss' kappa needs every item rated by the same number of raters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import krippendorff as _krippendorff
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from statsmodels.stats.inter_rater import fleiss_kappa as _sm_fleiss_kappa

__all__ = [
    "fleiss_kappa",
    "krippendorff_alpha_nominal",
    "krippendorff_alpha_nominal_from_counts",
]


def fleiss_kappa(counts_matrix: ArrayLike) -> float:
    """Fleiss' kappa from an items x categories matrix of rater counts (statsmodels).

    Every row must sum to the same number of raters, as Fleiss' formula assumes.
    """
    arr = np.asarray(counts_matrix, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
        raise ValueError(f"expected an items x categories matrix, got shape {arr.shape}")
    if np.any(arr < 0):
        raise ValueError("counts must be non-negative")
    row_sums = arr.sum(axis=1)
    if not np.allclose(row_sums, row_sums[0]) or row_sums[0] < 2:
        raise ValueError("every item needs the same number (>= 2) of ratings for Fleiss' kappa")
    return float(_sm_fleiss_kappa(arr, method="fleiss"))


def krippendorff_alpha_nominal_from_counts(value_counts: ArrayLike) -> float:
    """Krippendorff's alpha (nominal) from a units x values matrix of counts (`krippendorff`).

    ``value_counts[u, c]`` is how many raters gave unit ``u`` value ``c``; the library works
    from these counts directly, so the cost is O(units x values). Units with fewer than two
    ratings are not pairable and are dropped. Returns NaN when fewer than two values occur
    among pairable units (alpha undefined), where the library would raise or divide by zero.
    """
    counts = np.asarray(value_counts, dtype=np.float64)
    if counts.ndim != 2:
        raise ValueError(f"expected a units x values matrix, got shape {counts.shape}")
    if np.any(counts < 0):
        raise ValueError("counts must be non-negative")
    counts = counts[counts.sum(axis=1) >= 2]
    counts = counts[:, counts.sum(axis=0) > 0]  # values nobody used in a pairable unit
    if counts.shape[0] == 0 or counts.shape[1] < 2:
        return float("nan")
    return float(_krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))


def krippendorff_alpha_nominal(reliability_data: ArrayLike | Sequence[Sequence[Any]]) -> float:
    """Krippendorff's alpha for nominal data; ``reliability_data`` is raters x units.

    Missing ratings are ``None`` or NaN; values may be any hashable labels. Labels are integer-
    encoded once and counted per unit with a single ``bincount``, so 10k units x 5 raters takes
    milliseconds (no pairwise loops).
    """
    arr = np.asarray(reliability_data, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"expected raters x units, got shape {arr.shape}")
    n_units = arr.shape[1]
    flat = arr.ravel()
    unit_of = np.tile(np.arange(n_units), arr.shape[0])
    present = ~pd.isna(pd.Series(flat, dtype=object)).to_numpy()
    codes, uniques = pd.factorize(pd.Series(flat[present], dtype=object), sort=False)
    n_values = len(uniques)
    if n_values == 0:
        return float("nan")
    counts = np.bincount(
        unit_of[present] * n_values + codes, minlength=n_units * n_values
    ).reshape(n_units, n_values)
    return krippendorff_alpha_nominal_from_counts(counts)
