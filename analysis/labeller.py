"""LLM pre-labeller vs human labels: Cohen's kappa and per-category precision / recall.

The one computation of "the LLM against people": from a ``pairs(trajectory_id, llm_category,
human_category, prelabel_shown)`` frame (`analysis.sources.labeller_pairs`) to
``labeling.agreement.labeller_vs_human``. The Statistics table and the Agreement page both
come from here, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from labeling.agreement import labeller_vs_human

LABELLER_COLUMNS = [
    "category",
    "support",
    "predicted",
    "precision",
    "recall",
    "f1",
    "kappa",
    "override_rate",
]
#: Stand-in for "the LLM gave no category", so such items count as disagreements.
NO_LLM_LABEL = "(none)"
OVERALL = "(overall)"
# The comparison slices: a label made with the pre-label on screen may have been anchored by
# it, so its agreement with the LLM is also reported apart from blind ones.
PRELABEL_SLICES = ("all", "pre-label shown", "pre-label hidden")


def labeller_agreement(pairs: pd.DataFrame,
                       categories: Sequence[str] = ()) -> pd.DataFrame:
    """Per-category precision / recall / F1 / one-vs-rest kappa / override rate, plus an
    ``"(overall)"`` row with accuracy and the multi-class Cohen's kappa.

    Items without a human label are skipped (nothing to compare against); a missing LLM label
    becomes ``"(none)"`` so it counts as an override.
    """
    if pairs.empty or not {"llm_category", "human_category"} <= set(pairs.columns):
        return pd.DataFrame(columns=LABELLER_COLUMNS)
    rated = pairs[pairs["human_category"].notna()]
    if rated.empty:
        return pd.DataFrame(columns=LABELLER_COLUMNS)
    human = rated["human_category"].astype(str).tolist()
    pred = rated["llm_category"].astype("object").fillna(NO_LLM_LABEL).astype(str).tolist()
    # `categories` (the taxonomy's) lists categories nobody used too; others follow sorted.
    cats = [*categories, *sorted((set(human) | set(pred)) - set(categories))]
    out = labeller_vs_human(pred, human, cats)
    return out.reindex(columns=LABELLER_COLUMNS)


def llm_vs_human(pairs: pd.DataFrame, categories: Sequence[str] = ()) -> dict[str, pd.DataFrame]:
    """`labeller_agreement` over all pairs and over the pre-label shown / hidden slices
    (`PRELABEL_SLICES`); empty slices are left out. The "all" table is the Statistics
    page's labeller table. Pairs without a ``prelabel_shown`` column count as shown: unknown
    exposure is never passed off as blind."""
    if pairs.empty:
        return {}
    shown = (pairs["prelabel_shown"].fillna(True).astype(bool) if "prelabel_shown" in pairs
             else pd.Series(True, index=pairs.index))
    out: dict[str, pd.DataFrame] = {}
    for name, part in (("all", pairs), ("pre-label shown", pairs[shown]),
                       ("pre-label hidden", pairs[~shown])):
        table = labeller_agreement(part, categories)
        if not table.empty:
            out[name] = table
    return out


OFFLINE_COLUMNS = ["labeller", "n", "accuracy", "kappa", "step_exact", "step_within_1",
                   "suggested", "validation"]


def offline_comparison(figures: Mapping[str, Any]) -> pd.DataFrame:
    """One row per labeller from ``opinions.learn`` figures on the confirmed labels
    (``evaluate_confirmed``): the classifier (cross-validated) first, then the live heuristic
    and finder, then the stored pre-labels (Gemini, heuristic). Reporting only: the figures are
    computed in ``opinions.learn``, so this package needs no scikit-learn."""
    rows = [
        {"labeller": name, **{k: row.get(k) for k in OFFLINE_COLUMNS[1:]}}
        for name, row in figures.items()
        if isinstance(row, Mapping) and "accuracy" in row
    ]
    order = {"classifier": 0, "heuristic": 1, "finder": 2}
    rows.sort(key=lambda r: (order.get(str(r["labeller"]), 3), str(r["labeller"])))
    for r in rows:
        if r["validation"] is None:
            r["validation"] = "stored" if str(r["labeller"]).startswith("stored ") else "live"
    return pd.DataFrame(rows, columns=OFFLINE_COLUMNS)
