"""The signed-in person as the store's `Viewer`: pages pass it, the store decides what shows."""

from __future__ import annotations

from collections.abc import Sequence

from faillab.app.state import get_settings
from labeling.store import Store, User, Viewer, unknown_viewer_scope


def viewer_of(user: User | None, *, hide_prelabel: bool | None = None) -> Viewer:
    """`user` (None: nobody signed in) under the workspace's blind and pre-label settings."""
    settings = get_settings()
    return Viewer(
        user.name if user is not None else None,
        blind=settings.blind,
        hide_prelabel=settings.hide_prelabel if hide_prelabel is None else hide_prelabel,
    )


def automatic_opinions_visible(store: Store | None, trajectory_ids: Sequence[str],
                               user: User | None, *, hide_prelabel: bool | None = None,
                               ) -> frozenset[str]:
    """The items among `trajectory_ids` on which `user` may see the pre-label and the evidence
    finder's suggested category. The store decides; without a store nobody has labelled
    anything, and the same rule decides for a viewer who has recorded nothing."""
    viewer = viewer_of(user, hide_prelabel=hide_prelabel)
    if store is None:
        scope = unknown_viewer_scope(viewer)
        return frozenset(t for t in trajectory_ids if scope.may_see_llm(t))
    return store.prelabels.visible_items(trajectory_ids, viewer)
