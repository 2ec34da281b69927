"""One decision for a whole cluster, through the store's normal label path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from opinions.clusters.cluster import Cluster

if TYPE_CHECKING:
    from labeling.store import Store


def cluster_note(cluster: Cluster) -> str:
    return f"cluster decision: cluster {cluster.cluster_id} ({len(cluster.members)} items)"


def label_cluster(
    store: Store,
    cluster: Cluster,
    category: str,
    *,
    annotator: str,
    taxonomy_version: str,
    confirmed_outliers: Iterable[str] = (),
    first_error_steps: Mapping[str, int | None] | None = None,
    seconds_on_cluster: float | None = None,
) -> list[str]:
    """Label the cluster's core members, and the outliers the annotator confirmed one by one, as
    ordinary human labels by ``annotator`` with a note saying it was a cluster decision.

    Outliers not confirmed are left for item-by-item labelling. First error steps are per item
    (only those the annotator chose; never a guess). Returns the ids labelled, in order.

    A decision for many items at once is a lead's (or an admin's); an annotator may make one
    only when every chosen item is assigned to them. Otherwise ``PermissionDeniedError`` and
    nothing is labelled.
    """
    confirmed = set(confirmed_outliers)
    unknown = confirmed - set(cluster.outliers)
    if unknown:
        raise ValueError(f"not outliers of cluster {cluster.cluster_id}: {sorted(unknown)}")
    chosen = [m for m in cluster.members if m not in cluster.outliers or m in confirmed]
    store.labels.authorise_many(annotator, chosen, f"a decision for cluster {cluster.cluster_id}")
    steps = first_error_steps or {}
    per_item = seconds_on_cluster / len(chosen) if seconds_on_cluster and chosen else None
    note = cluster_note(cluster)
    for tid in chosen:
        store.labels.add(
            tid,
            category,
            annotator=annotator,
            taxonomy_version=taxonomy_version,
            source="human",
            first_error_step=steps.get(tid),
            note=note,
            seconds_on_item=per_item,
        )
    return chosen
