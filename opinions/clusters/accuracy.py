"""How accurate whole-cluster labels are against item labels (the Clusters page's trade-off).

A cluster decision gives every core member of a cluster one category. Against gold labels this
measures, over the members of clusters of two or more: the best case (the decision is the core's
true majority, i.e. the annotator chose the most common right answer), the decision the finder's
suggestions would propose (their majority in the core), and the finder item by item on the same
members. Outliers are left out, as the page leaves them to per-item confirmation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from opinions.clusters.cluster import Cluster


def cluster_label_accuracy(
    clusters: Sequence[Cluster], gold: Mapping[str, str], suggested: Mapping[str, str | None]
) -> dict[str, Any]:
    """``gold`` and ``suggested``: trajectory id -> category (None: no suggestion)."""
    multi = [c for c in clusters if len(c.members) >= 2]
    core = [m for c in multi for m in c.core if m in gold]
    best = proposed = item = 0
    for c in multi:
        golds = [gold[m] for m in c.core if m in gold]
        if not golds:
            continue
        majority = Counter(golds).most_common(1)[0][0]
        votes = Counter(suggested[m] for m in c.core if m in gold and suggested.get(m))
        proposal = votes.most_common(1)[0][0] if votes else None
        best += sum(g == majority for g in golds)
        proposed += sum(g == proposal for g in golds)
        item += sum(gold[m] == suggested.get(m) for m in c.core if m in gold)
    n = len(core)
    return {
        "clusters": len(multi),
        "core_items": n,
        "outliers": sum(len(c.outliers) for c in multi),
        "singletons": sum(1 for c in clusters if len(c.members) == 1),
        "best_case": round(best / n, 4) if n else None,
        "finder_majority": round(proposed / n, 4) if n else None,
        "finder_items": round(item / n, 4) if n else None,
    }
