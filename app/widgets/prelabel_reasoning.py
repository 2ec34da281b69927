"""The pre-labeller's opinion and its reasoning on the Trajectory page, as the store shows it.

The same read as Annotate's (``labeling.queue.prelabel_for`` with the viewer): in blind mode, or
while the pre-label is hidden until a person commits, the store hands the page no opinion, only
a flag that one exists, so the page cannot show what it never holds. Shown: the labeller, the
category, its confidence, its first faulty step and how that step stands to the evidence's
(``step_note``), and the rationale.
"""

from __future__ import annotations

import streamlit as st

from faillab.app.viewer import viewer_of
from faillab.app.widgets.evidence import step_note
from faillab.app.widgets.rubric import category_label
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.queue import prelabel_for
from labeling.store import Store, User
from taxonomy import Taxonomy, default_taxonomy
from trajectories.model import Trajectory


@st.cache_resource(show_spinner=False)
def _taxonomy() -> Taxonomy:
    return default_taxonomy()


def prelabel_line(labeller: str | None, category: str, confidence: float | None,
                  step: int | None) -> str:
    """``Pre-label (heuristic): SQL Logic Error · confidence 0.65 · first faulty step 3``
    (Markdown, every piece of data escaped)."""
    conf = f" · confidence {confidence:.2f}" if confidence is not None else ""
    where = f" · first faulty step {step}" if step is not None else " · no step named"
    return (f"**Pre-label ({escape_markdown(labeller or 'LLM')}):** "
            f"{escape_markdown(category)}{conf}{where}")


def render_prelabel_reasoning(store: Store | None, traj: Trajectory, user: User | None) -> None:
    """The pre-label on ``traj`` with its reasoning, where the store lets ``user`` see it; a
    line saying it is hidden where the store hides it; nothing where there is none (or no
    store yet: nobody has pre-labelled anything)."""
    if store is None or traj.id is None:
        return
    opinion, hidden = prelabel_for(store, traj.id, viewer_of(user))
    if hidden:
        st.caption("A pre-label exists for this trajectory; it stays hidden until you label "
                   "the item (blind labelling).")
        return
    if opinion is None:
        return
    with st.container(border=True, key="trajectory_prelabel"):
        st.markdown(prelabel_line(opinion.labeller, category_label(_taxonomy(), opinion.category),
                                  opinion.confidence, opinion.first_error_step))
        # The evidence box above names a step too: say how the two stand and why they differ.
        note = step_note(traj, opinion.first_error_step)
        if note is not None:
            st.caption(note)
        if opinion.rationale:
            with st.container(height=140 if len(opinion.rationale) > 400 else "content",
                              border=False, key="trajectory_prelabel_rationale"):
                st.caption("**Reasoning**")
                plain(opinion.rationale, caption=True)
        else:
            st.caption("The pre-labeller recorded no reasoning.")
