"""The plain-language note that explains a two-rater kappa next to its figures.

A low Cohen's kappa beside high raw agreement is usually the kappa paradox (one category
dominates, so chance agreement is already high), but it can also be real disagreement; the
figures decide which. This module owns that choice and its wording; the numbers themselves are
computed in `labeling.agreement.pairwise`, which attaches the note to `BinaryAgreement`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["kappa_paradox_note"]

# Thresholds for the plain-language kappa-paradox note. A prevalence index above 0.5 means at
# least three quarters of the agreed items sit in one category, which is where kappa's chance
# term starts to dominate; a 0.3 gap between raw agreement and kappa is large enough that a
# reader comparing the two numbers will ask why.
_PARADOX_PREVALENCE = 0.5
_PARADOX_GAP = 0.3
# The paradox explains a low kappa only when agreement itself is high: raw agreement of at
# least 80% (PABAK 0.6, "substantial" on the usual scale). Below it a low kappa is disagreement
# and the note says so (a PABAK of 0.20 once came with "the kappa paradox, not poor agreement").
_PARADOX_RAW = 0.8
_PARADOX_PABAK = 0.6


def _fmt_pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def kappa_paradox_note(
    p_o: float, kappa: float, pi: float, labels: tuple[str, str], table: NDArray[np.float64],
    pabak_value: float, ac1: float, p_e: float,
) -> str | None:
    """Why kappa reads as it does for a 2x2 ``table``, or None when it needs no explanation.

    ``p_o`` is raw agreement, ``pi`` the prevalence index, ``p_e`` the chance agreement, and
    ``labels`` name the table's two categories (first = row/column 0).
    """
    if math.isnan(kappa):
        only = labels[0] if table[0, 0] > 0 else labels[1]
        return (
            f"Cohen's kappa is undefined here: both raters labelled every item '{only}', so "
            "agreement expected by chance is already 100% and kappa has nothing to measure. "
            f"Raw agreement is {_fmt_pct(p_o)}; rate more items or report raw agreement only."
        )
    if not (pi > _PARADOX_PREVALENCE or p_o - kappa > _PARADOX_GAP):
        return None
    if p_o < _PARADOX_RAW or pabak_value < _PARADOX_PABAK:
        return (
            f"The raters agree on {_fmt_pct(p_o)} of items and Cohen's kappa is {kappa:.2f}. "
            f"The prevalence-robust measures are low too (PABAK {pabak_value:.2f}, Gwet's AC1 "
            f"{ac1:.2f}), so this is real disagreement, not the kappa paradox: read the "
            "disagreements and sharpen the criteria before trusting either rater's labels."
        )
    # Share of all 2n labels (both raters pooled) that fall in the first category.
    share_first = float((table[0, :].sum() + table[:, 0].sum()) / (2 * table.sum()))
    dominant = labels[0] if share_first >= 0.5 else labels[1]
    share = max(share_first, 1.0 - share_first)
    return (
        f"The raters agree on {_fmt_pct(p_o)} of items, yet Cohen's kappa is only {kappa:.2f}. "
        f"This is the kappa paradox, not poor agreement: {_fmt_pct(share)} of all labels are "
        f"'{dominant}', so kappa's chance-agreement term is already {_fmt_pct(p_e)} and the few "
        "disagreements on the rare category take up most of the little room left above it. "
        f"Prevalence-robust measures tell the other half of the story: PABAK {pabak_value:.2f}, "
        f"Gwet's AC1 {ac1:.2f}. Report kappa together with them and with raw agreement."
    )
