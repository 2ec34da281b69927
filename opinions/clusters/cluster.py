"""Group look-alike failures: agglomerative clustering of their embeddings (cosine, average link).

Members far from their cluster's centre are marked outliers: a cluster decision labels them only
when the annotator confirms each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

DEFAULT_OUTLIER_SIMILARITY = 0.75  # below this similarity to the centre a member is an outlier


@dataclass(slots=True)
class Cluster:
    cluster_id: int
    members: list[str]  # every member, closest to the centre first
    outliers: list[str] = field(default_factory=list)
    cohesion: float = 1.0  # mean similarity of the members to the centre

    @property
    def core(self) -> list[str]:
        return [m for m in self.members if m not in self.outliers]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster_id,
            "size": len(self.members),
            "cohesion": round(self.cohesion, 4),
            "members": self.members,
            "outliers": self.outliers,
        }


def cluster_embeddings(
    ids: Sequence[str],
    vectors: NDArray[np.float64],
    *,
    distance: float,
    outlier_similarity: float = DEFAULT_OUTLIER_SIMILARITY,
) -> list[Cluster]:
    """Clusters of ``ids`` (rows of L2-normalised ``vectors``), largest first; singletons too,
    so every failure is in exactly one cluster. Deterministic for the same input."""
    if len(ids) != len(vectors):
        raise ValueError(f"{len(ids)} ids but {len(vectors)} vectors")
    if len(ids) == 0:
        return []
    if len(ids) == 1:
        return [Cluster(0, [ids[0]])]
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance
    )
    assignment = model.fit_predict(vectors)
    groups: dict[int, list[int]] = {}
    for row, label in enumerate(assignment):
        groups.setdefault(int(label), []).append(row)
    built: list[Cluster] = []
    for rows in groups.values():
        centre = vectors[rows].mean(axis=0)
        norm = float(np.linalg.norm(centre)) or 1.0
        sims = vectors[rows] @ (centre / norm)
        order = sorted(range(len(rows)), key=lambda i: (-float(sims[i]), ids[rows[i]]))
        members = [ids[rows[i]] for i in order]
        outliers = [ids[rows[i]] for i in order if len(rows) > 1 and sims[i] < outlier_similarity]
        built.append(Cluster(0, members, outliers, float(np.mean(sims))))
    built.sort(key=lambda c: (-len(c.members), c.members[0]))
    for number, item in enumerate(built):
        item.cluster_id = number
    return built
