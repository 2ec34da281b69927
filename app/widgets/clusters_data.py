"""The Clusters page's view of the failures, computed once per workspace content and process.

Embedding and clustering reads every failure and runs the evidence finder on each (about 5 s
for the demo's 854 failures), so the first visit waited for it. The server now computes it in
the background after its first page, next to the Statistics warm-up, for workspaces with up to
``WARM_UP_LIMIT`` failures; above that the cost (about 6 ms per failure on one core) would
compete with the people using the server, and the first visit computes it, with a spinner.
"""

from __future__ import annotations

import streamlit as st

from faillab.app.widgets.stats_data import missing_sqlite_store
from opinions.clusters import ClusterView, build_clusters, default_embedder, workspace_failures
from trajectories.workspace import Workspace

#: Failures up to which the server clusters in the background before anyone asks.
WARM_UP_LIMIT = 5_000


def parts_signature(ws: Workspace) -> tuple[str, ...]:
    """What the cached view is keyed by: the failures change only when the part files do."""
    return tuple(sorted(str(p) for p in ws.part_files()))


@st.cache_data(max_entries=4, show_spinner="Embedding and clustering the failures…")
def cluster_view(root: str, annotations_url: str, signature: tuple[str, ...],
                 distance: float | None) -> ClusterView:
    """Every failure's cluster and summary. The evidence a pre-label run stored is reused
    (the finder runs only where there is none); who may see which suggestion is decided per
    viewer when the page draws them, not here (the view is shared by everyone)."""
    from faillab.app.state import get_store_for, get_workspace
    from opinions.learn.proposals import stored_evidence

    stored = {} if missing_sqlite_store(annotations_url) else \
        stored_evidence(get_store_for(annotations_url).prelabels.successful())
    return build_clusters(workspace_failures(get_workspace(root)), default_embedder("auto"),
                          distance=distance, stored=stored)


def warm_cluster_view(ws: Workspace, annotations_url: str) -> None:
    """Fill the page's cache for the default distance (in a background thread; draws nothing)."""
    from labeling.queue import failed_frame

    if 0 < len(failed_frame(ws)) <= WARM_UP_LIMIT:
        cluster_view(str(ws.root), annotations_url, parts_signature(ws), None)
