"""Does the workspace hold what the annotation store labels? A workspace that shows no
trajectories while the store holds labels on some is a wrong address (a mistyped bucket
prefix or workspace folder), not an empty project: serving it as empty would show every
page blank and let people start over on top of their own work."""

from __future__ import annotations

from labeling.store import Store
from trajectories.workspace import Workspace


def missing_workspace(ws: Workspace, store: Store) -> str | None:
    """Why ``ws`` must not be served as it is, or None when it may."""
    if ws.exists():
        return None
    known = store.trajectory_ids.known_count()
    if not known:
        return None
    where = ws.remote.location.url if ws.remote is not None else str(ws.parts_dir)
    return (f"no trajectories at {where}, but the annotation store holds labels on {known} "
            "trajectories: check FAILLAB_TRAJECTORIES_URL / FAILLAB_WORKSPACE (a mistyped "
            "bucket, prefix or folder?); an empty workspace is not served in their place")
