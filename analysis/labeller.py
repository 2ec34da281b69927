"""LLM pre-labeller vs human labels: Cohen's kappa and per-category precision / recall.

Thin adapter from a ``pairs(trajectory_id, llm_category, human_category)`` frame to
``labeling.agreement.labeller_vs_human``. The sklearn fallback keeps the analysis usable (same
columns) when the labeling package is not importable, e.g. in a stripped-down install.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support

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


def _fallback(pred: list[str], human: list[str], cats: list[str]) -> pd.DataFrame:
    p = np.asarray(pred, dtype=object)
    h = np.asarray(human, dtype=object)
    precision, recall, f1, support = precision_recall_fscore_support(
        h, p, labels=cats, zero_division=np.nan
    )
    rows = []
    for i, cat in enumerate(cats):
        hb, pb = h == cat, p == cat
        # One-vs-rest kappa is undefined when both raters are constant on this category.
        kappa = (
            float(cohen_kappa_score(hb, pb))
            if (hb.any() or pb.any()) and not (hb.all() and pb.all())
            else float("nan")
        )
        rows.append(
            {
                "category": cat,
                "support": int(support[i]),
                "predicted": int(pb.sum()),
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "kappa": kappa,
                "override_rate": 1.0 - float(precision[i]),
            }
        )
    accuracy = float((p == h).mean())
    overall_kappa = (
        float(cohen_kappa_score(h, p, labels=cats))
        if len(set(human) | set(pred)) > 1
        else float("nan")
    )
    rows.append(
        {
            "category": OVERALL,
            "support": len(p),
            "predicted": len(p),
            "precision": accuracy,
            "recall": accuracy,
            "f1": accuracy,
            "kappa": overall_kappa,
            "override_rate": 1.0 - accuracy,
        }
    )
    out = pd.DataFrame(rows, columns=LABELLER_COLUMNS)
    out.attrs["kappa"] = overall_kappa
    out.attrs["override_rate"] = 1.0 - accuracy
    out.attrs["n"] = len(p)
    return out


def labeller_agreement(pairs: pd.DataFrame) -> pd.DataFrame:
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
    cats = sorted(set(human) | set(pred))
    try:
        from labeling.agreement import labeller_vs_human
    except ImportError:  # pragma: no cover - only when labeling is absent
        return _fallback(pred, human, cats)
    out = labeller_vs_human(pred, human, cats)
    return out.reindex(columns=LABELLER_COLUMNS)
