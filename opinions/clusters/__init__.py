"""Look-alike failures together: embed, cluster, and label a whole cluster in one decision."""

from __future__ import annotations

from labeling.pool import workspace_failures
from opinions.clusters.build import ClusterView, build_clusters
from opinions.clusters.cluster import Cluster, cluster_embeddings
from opinions.clusters.decide import cluster_note, label_cluster
from opinions.clusters.describe import cluster_title, shared_words
from opinions.clusters.embed import Embedder, TfidfEmbedder, default_embedder, minilm_available

__all__ = [
    "Cluster",
    "ClusterView",
    "Embedder",
    "TfidfEmbedder",
    "build_clusters",
    "cluster_embeddings",
    "cluster_note",
    "cluster_title",
    "default_embedder",
    "label_cluster",
    "minilm_available",
    "shared_words",
    "workspace_failures",
]
