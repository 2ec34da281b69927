"""Queue logic that sits between the workspace and the annotation store.

The store knows assignments and labels but not what a trajectory is; the workspace knows
trajectories but nothing about people. This module joins the two (which items are failures,
which intent x scope stratum an item belongs to). Agreement among raters lives in
`labeling.rater_agreement`. No UI code here, so pages stay thin and everything can be
unit-tested against a plain store.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from labeling.pool import failed_frame
from labeling.store.policy import OPERATOR, Viewer
from trajectories.outcome import still_needing_a_person

if TYPE_CHECKING:
    from labeling.store import LlmOpinion, Store
    from trajectories.workspace import Workspace



# -- which items ---------------------------------------------------------------------------------


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
    # A lead plans the team's work: every person's verdict counts (a lead's wins).
    frame = failed_frame(ws, store.verdicts.effective())
    if limit is not None:
        frame = frame.head(limit)
    return store.queues.assign(
        list(frame["id"]), annotators, overlap=overlap, double_share=double_share, seed=seed,
        queue=queue, strata=strata_for(frame), actor=actor,
    )


def take_unassigned(store: Store, ws: Workspace, user: str, n: int = 25, *,
                    left_to_machine: Collection[str] = frozenset(), overlap: int = 1) -> int:
    """Give `user` up to `n` items that need a person and that fewer than `overlap` people
    are assigned (never one already theirs): self-service work without a lead's plan.

    With `overlap` 1 (the default) an item anyone holds is left alone, so a lead's overlap
    plan is never disturbed; with 2, a second annotator can take items a first one took, and
    agreement can be measured on them. Items routing by measured trust leaves to their
    labeller (`left_to_machine`, ``opinions.learn.trust``) are not taken: the queue would
    never show them; spot checks are taken like any other item.
    """
    if overlap < 1:
        raise ValueError("overlap must be at least 1")
    holders: dict[str, set[str]] = {}
    for tid, name, _queue in store.queues.assignments():
        holders.setdefault(tid, set()).add(name)
    # What decides for this person: a lead's verdict, else their own (a colleague's never).
    frame = failed_frame(ws, store.verdicts.for_queue(user))
    free = [tid for tid in (str(t) for t in frame["id"])
            if tid not in left_to_machine and user not in holders.get(tid, ())
            and len(holders.get(tid, ())) < overlap][:n]
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
    ranking: Mapping[str, float] | None = None,
    left_to_machine: Collection[str] | None = None,
) -> list[str]:
    """`user`'s next items (the store's order), restricted to failed trajectories.

    An assignment can outlive a re-score that turned a failure into a success; such items no
    longer need a failure label, so they are left out rather than shown with no category fitting.
    With a `ranking` (``opinions.ranking.classifier_ranking``), the items the classifier is
    least sure of come first, where a person's label teaches it most; items it has no
    proposal for follow in the store's order. Which items are shown is the store's decision
    either way; only the order moves.
    """
    return queue_state(store, failed_ids, user, prelabel_threshold=prelabel_threshold,
                       spot_check_share=spot_check_share, seed=seed, ranking=ranking,
                       left_to_machine=left_to_machine).waiting


@dataclass(frozen=True)
class QueueState:
    """Where `user` stands in their queue, counted so every number on screen is true.

    `needed` is what the person must label (done plus waiting); assigned items whose confident
    pre-label is left to the LLM (or that a re-score turned into a success) are counted apart,
    never as open work.
    """

    waiting: list[str]
    assigned: int
    labelled: int

    @property
    def needed(self) -> int:
        return self.labelled + len(self.waiting)

    @property
    def not_for_you(self) -> int:
        return max(0, self.assigned - self.needed)

    def position(self, skipped: int) -> int:
        """1-based number of the item on screen: labelled and put-aside items come first."""
        return min(self.needed, self.labelled + skipped + 1)


def queue_state(store: Store, failed_ids: Iterable[str], user: str, *,
                prelabel_threshold: float, spot_check_share: float,
                seed: int = 0, ranking: Mapping[str, float] | None = None,
                left_to_machine: Collection[str] | None = None) -> QueueState:
    """`user`'s waiting items (``queue_for``) and progress, from one read of the store;
    ``left_to_machine`` as in ``Queues.queue_of``."""
    mine = store.queues.queue_of(user, prelabel_threshold=prelabel_threshold,
                                 spot_check_share=spot_check_share, seed=seed,
                                 left_to_machine=left_to_machine)
    # `failed_ids` is the workspace's pool; the verdicts that decide this person's items (a
    # lead's, else their own) move items in and out of it by the one outcome rule.
    waiting = still_needing_a_person(mine.todo, failed_ids, mine.verdicts)
    if ranking:
        # The items the ranking is least sure of first (where a person's label teaches it
        # most); items it has no score for keep their order at the end.
        scored = sorted((t for t in waiting if t in ranking), key=lambda t: ranking[t])
        waiting = scored + [t for t in waiting if t not in ranking]
    return QueueState(waiting, mine.assigned, mine.done)


# -- the LLM's pre-label, as people see it -------------------------------------------------------


def prelabel_for(store: Store, trajectory_id: str,
                 viewer: Viewer) -> tuple[LlmOpinion | None, bool]:
    """The automatic opinion on an item as `viewer` may see it (the store's own record, with
    its rationale), and whether the store holds one it hides from them (its blind rules)."""
    return store.prelabels.opinion_for(trajectory_id, viewer)


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
