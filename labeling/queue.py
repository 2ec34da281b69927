"""Queue and agreement logic that sits between the workspace and the annotation store.

The store knows assignments and labels but not what a trajectory is; the workspace knows
trajectories but nothing about people. This module joins the two (which items are failures,
which intent x scope stratum an item belongs to) and turns stored labels into the inputs the
agreement statistics in `labeling.agreement` expect. No UI code here, so pages stay thin and
everything can be unit-tested against a plain store.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from labeling.agreement import (
    confusion_matrix,
    fleiss_kappa,
    krippendorff_alpha_nominal,
    labeller_vs_human,
    pairwise_cohens,
)
from labeling.store.policy import OPERATOR, Viewer

if TYPE_CHECKING:
    from labeling.store import LlmOpinion, Store
    from trajectories.workspace import Workspace

PAIR_COLUMNS = ["rater_a", "rater_b", "n_items", "n_agree", "raw_agreement", "kappa",
                "ci_low", "ci_high"]
# The comparison slices for LLM-vs-human: a label made with the pre-label on screen may have
# been anchored by it, so its agreement with the LLM is reported apart from blind ones.
PRELABEL_SLICES = ("all", "pre-label shown", "pre-label hidden")


# -- which items ---------------------------------------------------------------------------------


def failed_frame(ws: Workspace) -> pd.DataFrame:
    """Failed trajectories (workspace `success = false`) with the columns queues stratify on."""
    frame: pd.DataFrame = ws.query_df(
        "SELECT id, intent, scope, template_id, task_id FROM trajectories "
        "WHERE NOT success ORDER BY run, task_id, rollout, id"
    )
    return frame


def stratum_of(intent: Any, scope: Any) -> str:
    """The intent x scope stratum; a missing value is its own level, never dropped."""
    def part(value: Any) -> str:
        missing = value is None or (isinstance(value, float) and math.isnan(value))
        return "unknown" if missing else str(value)

    return f"{part(intent)} x {part(scope)}"


def strata_for(frame: pd.DataFrame) -> dict[str, str]:
    return {str(r.id): stratum_of(r.intent, r.scope) for r in frame.itertuples(index=False)}


def create_assignments(
    store: Store,
    ws: Workspace,
    annotators: Sequence[str],
    *,
    overlap: int = 2,
    double_share: float = 0.2,
    seed: int = 0,
    queue: str = "default",
    limit: int | None = None,
    actor: str | None = None,
) -> int:
    """Assign the workspace's failures; a stratified `double_share` gets `overlap` people.

    Stratifying the doubly-annotated share by intent x scope keeps agreement from being
    measured on whichever kind of question happens to dominate the failures.
    `limit` takes only the first N failures (in browse order), for a pilot round.
    """
    frame = failed_frame(ws)
    if limit is not None:
        frame = frame.head(limit)
    return store.queues.assign(
        list(frame["id"]), annotators, overlap=overlap, double_share=double_share, seed=seed,
        queue=queue, strata=strata_for(frame), actor=actor,
    )


def take_unassigned(store: Store, ws: Workspace, user: str, n: int = 25) -> int:
    """Give `user` up to `n` failures nobody is assigned yet (single annotation).

    Lets one person start labelling without a lead planning overlap first (local use); items
    already in anyone's queue are left alone so a lead's overlap plan is never disturbed.
    """
    taken = {tid for tid, _, _ in store.queues.assignments()}
    frame = failed_frame(ws)
    free = [str(t) for t in frame["id"] if str(t) not in taken][:n]
    if not free:
        return 0
    return store.queues.assign(free, [user], overlap=1, double_share=0.0, queue="self-service",
                               actor=user)


def queue_for(
    store: Store,
    failed_ids: Iterable[str],
    user: str,
    *,
    prelabel_threshold: float,
    spot_check_share: float,
    seed: int = 0,
) -> list[str]:
    """`user`'s next items (the store's order), restricted to failed trajectories.

    An assignment can outlive a re-score that turned a failure into a success; such items no
    longer need a failure label, so they are left out rather than shown with no category fitting.
    """
    failed = set(failed_ids)
    todo = store.queues.next_items(user, prelabel_threshold=prelabel_threshold,
                                   spot_check_share=spot_check_share, seed=seed)
    return [tid for tid in todo if tid in failed]


# -- the LLM's pre-label, as people see it -------------------------------------------------------


@dataclass(frozen=True)
class PrelabelView:
    category: str
    confidence: float | None
    first_error_step: int | None
    secondary_category: str | None
    rationale: str | None
    labeller: str | None


def prelabel_for(store: Store, trajectory_id: str) -> PrelabelView | None:
    """The LLM opinion on an item, with its rationale, if any."""
    opinion = store.prelabels.opinion(trajectory_id)
    if opinion is None:
        return None
    return PrelabelView(opinion.category, opinion.confidence, opinion.first_error_step,
                        opinion.secondary_category, opinion.rationale, opinion.labeller)


# -- final labels (Browse filter) ----------------------------------------------------------------


def ids_with_final_category(store: Store, category: str | Sequence[str],
                            taxonomy_version: str | None = None, *,
                            viewer: Viewer = OPERATOR) -> list[str]:
    """Trajectory ids whose final label, as `viewer` may see it, is `category` (or one of
    several). A blind annotator's "final label" is built from their own labels and the
    pre-labels only, so the filter cannot reveal a colleague's label."""
    wanted = {category} if isinstance(category, str) else set(category)
    final = store.adjudications.final_labels(taxonomy_version, viewer=viewer)
    return sorted(final.loc[final["category"].isin(wanted), "trajectory_id"].astype(str))


# -- agreement -----------------------------------------------------------------------------------


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


def all_llm_opinions(store: Store, taxonomy_version: str | None = None,
                     ) -> dict[str, LlmOpinion]:
    """trajectory -> LLM opinion, in one read (never per item: that would be quadratic)."""
    return store.prelabels.opinions(taxonomy_version)


def llm_vs_human(store: Store, categories: Sequence[str],
                 taxonomy_version: str | None = None, *,
                 viewer: Viewer = OPERATOR) -> dict[str, pd.DataFrame]:
    """Per-category precision, recall and override rate of the LLM against each human label.

    One comparison per (annotator, item) that has both a human label and an LLM opinion,
    sliced by whether the annotator saw the pre-label (`PRELABEL_SLICES`); empty slices are
    left out. The override rate of the "pre-label hidden" slice is the honest one.
    """
    df = store.labels.frame(taxonomy_version=taxonomy_version, viewer=viewer)
    humans = df[df["source"] == "human"].drop_duplicates(["annotator", "trajectory_id"],
                                                         keep="last")
    opinions = all_llm_opinions(store, taxonomy_version)
    pairs: dict[str, tuple[list[str], list[str]]] = {s: ([], []) for s in PRELABEL_SLICES}
    for r in humans.itertuples(index=False):
        opinion = opinions.get(str(r.trajectory_id))
        if opinion is None:
            continue
        shown = "pre-label shown" if bool(r.prelabel_shown) else "pre-label hidden"
        for key in ("all", shown):
            pairs[key][0].append(opinion.category)
            pairs[key][1].append(str(r.category))
    out: dict[str, pd.DataFrame] = {}
    for key, (pred, human) in pairs.items():
        if pred:
            cats = list(dict.fromkeys([*categories, *pred, *human]))
            out[key] = labeller_vs_human(pred, human, cats)
    return out


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
