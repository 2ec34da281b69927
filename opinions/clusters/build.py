"""Clusters of a workspace's failed trajectories, with what a person needs to judge each item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opinions.clusters.cluster import DEFAULT_OUTLIER_SIMILARITY, Cluster, cluster_embeddings
from opinions.clusters.embed import Embedder

if TYPE_CHECKING:
    from trajectories.model import Trajectory


@dataclass(frozen=True, slots=True)
class ItemSummary:
    trajectory_id: str
    task_id: str
    question: str
    divergence: str  # the finder's reason, or "" when nothing decides
    suggested: str | None  # the finder's suggested category
    step: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.trajectory_id,
            "task_id": self.task_id,
            "question": self.question,
            "divergence": self.divergence,
            "suggested": self.suggested,
            "step": self.step,
        }


@dataclass(frozen=True, slots=True)
class ClusterView:
    embedder: str
    distance: float
    clusters: list[Cluster]
    items: dict[str, ItemSummary]

    def to_dict(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder,
            "distance": self.distance,
            "failures": len(self.items),
            "clusters": [
                {**c.to_dict(), "items": [self.items[m].to_dict() for m in c.members]}
                for c in self.clusters
            ],
        }


def build_clusters(
    trajectories: dict[str, Trajectory],
    embedder: Embedder,
    *,
    distance: float | None = None,
    outlier_similarity: float = DEFAULT_OUTLIER_SIMILARITY,
    stored: Mapping[str, Mapping[str, Any]] | None = None,
) -> ClusterView:
    """Embed every failure (question, final SQL, error text, divergence) and cluster them.
    ``stored`` (trajectory id -> the evidence a pre-label run stored beside its pre-label)
    spares the finder on the failures it covers, as for the queue's classifier."""
    from opinions.features import failure_text, findings
    from opinions.prelabel.heuristic import HeuristicLabeller

    ids = sorted(trajectories)
    labeller = HeuristicLabeller()
    found = {i: findings(trajectories[i], labeller, (stored or {}).get(i)) for i in ids}
    vectors = embedder.embed([failure_text(trajectories[i], found[i]) for i in ids])
    cut = embedder.default_distance if distance is None else distance
    clusters = cluster_embeddings(ids, vectors, distance=cut,
                                  outlier_similarity=outlier_similarity)
    items: dict[str, ItemSummary] = {}
    for i in ids:
        t = trajectories[i]
        ev = found[i].evidence
        question = t.task.question if isinstance(t.task.question, str) else ""
        step = ev.get("step")
        items[i] = ItemSummary(i, str(t.task.id), " ".join(question.split())[:300],
                               str(ev.get("reason") or ""),
                               str(ev["category"]) if ev.get("category") else None,
                               step if isinstance(step, int) else None)
    return ClusterView(embedder.name, cut, clusters, items)
