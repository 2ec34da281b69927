"""The signed-in person as the store's `Viewer`: pages pass it, the store decides what shows."""

from __future__ import annotations

from faillab.app.state import get_settings
from labeling.store import User, Viewer


def viewer_of(user: User | None, *, hide_prelabel: bool | None = None) -> Viewer:
    """`user` (None: nobody signed in) under the workspace's blind and pre-label settings."""
    settings = get_settings()
    return Viewer(
        user.name if user is not None else None,
        blind=settings.blind,
        hide_prelabel=settings.hide_prelabel if hide_prelabel is None else hide_prelabel,
    )
