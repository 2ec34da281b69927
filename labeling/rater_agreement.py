"""Agreement among the people who labelled the same items, read from the annotation store.

Turns stored labels into the inputs the statistics in `labeling.agreement` expect: pairwise
Cohen's kappa, Fleiss' kappa and Krippendorff's alpha over all raters, confusion between two
raters, and agreement on the first faulty step. What each figure may include is decided by the
store for the given viewer. The LLM against people is `analysis.labeller.llm_vs_human`, one
computation for every page.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from labeling.agreement import (
    confusion_matrix,
    fleiss_kappa,
    krippendorff_alpha_nominal,
    pairwise_cohens,
)
from labeling.store.policy import OPERATOR, Viewer

if TYPE_CHECKING:
    from labeling.store import Store

PAIR_COLUMNS = ["rater_a", "rater_b", "n_items", "n_agree", "raw_agreement", "kappa",
                "ci_low", "ci_high"]


def latest_human_labels(store: Store, taxonomy_version: str | None = None, *,
                        viewer: Viewer = OPERATOR) -> dict[str, dict[str, str]]:
    """annotator -> trajectory -> that annotator's latest primary category (what `viewer`
    may see)."""
    df = store.labels.frame(taxonomy_version=taxonomy_version, viewer=viewer)
    df = df[df["source"] == "human"]
    out: dict[str, dict[str, str]] = {}
    # labels.frame() is oldest first, so a later (superseding) label overwrites an earlier one.
    for r in df.itertuples(index=False):
        out.setdefault(str(r.annotator), {})[str(r.trajectory_id)] = str(r.category)
    return out


def pairwise_table(labels_by_rater: Mapping[str, Mapping[str, str]]) -> pd.DataFrame:
    rows = []
    for p in pairwise_cohens(labels_by_rater):
        k = p.kappa
        rows.append({
            "rater_a": p.rater_a, "rater_b": p.rater_b, "n_items": p.n_items,
            "n_agree": p.n_agree, "raw_agreement": p.raw_agreement,
            "kappa": k.kappa if k else None, "ci_low": k.ci_low if k else None,
            "ci_high": k.ci_high if k else None,
        })
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


@dataclass(frozen=True)
class MultiRater:
    raters: int
    items_rated_twice: int
    fleiss_kappa: float | None
    fleiss_items: int
    fleiss_raters_per_item: int
    krippendorff_alpha: float | None


def multi_rater_summary(labels_by_rater: Mapping[str, Mapping[str, str]],
                        categories: Sequence[str]) -> MultiRater:
    """Fleiss' kappa and Krippendorff's alpha over all raters.

    Fleiss assumes the same number of ratings per item, so it uses the items with the most
    common rating count (>= 2); alpha handles missing ratings and uses every pairable item.
    """
    raters = sorted(labels_by_rater)
    items = sorted({tid for ratings in labels_by_rater.values() for tid in ratings})
    per_item = {tid: [labels_by_rater[r][tid] for r in raters if tid in labels_by_rater[r]]
                for tid in items}
    pairable = {tid: v for tid, v in per_item.items() if len(v) >= 2}
    alpha: float | None = None
    if pairable:
        data = [[labels_by_rater[r].get(tid) for tid in pairable] for r in raters]
        value = krippendorff_alpha_nominal(data)
        alpha = None if math.isnan(value) else value
    fleiss: float | None = None
    fleiss_items = 0
    m = 0
    if pairable:
        m = Counter(len(v) for v in pairable.values()).most_common(1)[0][0]
        cats = list(dict.fromkeys([*categories, *(c for v in pairable.values() for c in v)]))
        matrix = [[v.count(c) for c in cats] for v in pairable.values() if len(v) == m]
        fleiss_items = len(matrix)
        if len(cats) >= 2:
            value = fleiss_kappa(matrix)
            fleiss = None if math.isnan(value) else value
    return MultiRater(len(raters), len(pairable), fleiss, fleiss_items, m, alpha)


def pair_confusion(labels_by_rater: Mapping[str, Mapping[str, str]], rater_a: str,
                   rater_b: str, categories: Sequence[str]) -> pd.DataFrame:
    """rater_a's categories down the rows, rater_b's across, over items both labelled."""
    la, lb = labels_by_rater.get(rater_a, {}), labels_by_rater.get(rater_b, {})
    shared = sorted(set(la) & set(lb))
    cats = list(dict.fromkeys([*categories, *(la[t] for t in shared), *(lb[t] for t in shared)]))
    return confusion_matrix([la[t] for t in shared], [lb[t] for t in shared], cats)


@dataclass(frozen=True)
class StepAgreement:
    """Agreement on the first faulty step between annotators of the same item.

    Counted only over labels whose step the human chose: a step accepted from the pre-label
    (or none at all) would measure the pre-labeller, not the people.
    """

    pairs: int
    agreeing: int
    excluded_labels: int  # latest human labels left out: no step, or the pre-label's step

    @property
    def raw_agreement(self) -> float | None:
        return self.agreeing / self.pairs if self.pairs else None


def step_agreement(store: Store, taxonomy_version: str | None = None, *,
                   viewer: Viewer = OPERATOR) -> StepAgreement:
    df = store.labels.frame(taxonomy_version=taxonomy_version, viewer=viewer)
    humans = df[df["source"] == "human"].drop_duplicates(["annotator", "trajectory_id"],
                                                         keep="last")
    chosen = humans[humans["first_error_step"].notna() & ~humans["step_from_prelabel"].astype(bool)]
    pairs = agreeing = 0
    for _, group in chosen.groupby("trajectory_id"):
        steps = [int(v) for v in group["first_error_step"]]
        for i in range(len(steps)):
            for j in range(i + 1, len(steps)):
                pairs += 1
                agreeing += steps[i] == steps[j]
    return StepAgreement(pairs, agreeing, len(humans) - len(chosen))
