"""Annotate: label why failed trajectories failed, one item at a time, from your own queue.

Leads and admins create assignments here too. The item view and the form live in one
fragment, so saving a label and moving on re-runs only the panel, not the page around it.
"""

from __future__ import annotations

import streamlit as st
from streamlit.errors import StreamlitAPIException

from faillab.app.auth import require_user
from faillab.app.state import get_settings, get_store, load_trajectory, workspace
from faillab.app.widgets.answer import render_answer_panel
from faillab.app.widgets.label_form import (
    render_label_form,
    render_last_saved,
    render_visible_labels,
)
from faillab.app.widgets.queue import render_assignment_form, render_progress
from faillab.app.widgets.rubric import render_rubric
from faillab.app.widgets.safe import escape_markdown, plain
from faillab.app.widgets.steps import render_steps
from labeling.queue import failed_frame, prelabel_for, queue_for, take_unassigned
from labeling.store import User
from labeling.store.records import LEAD_ROLES
from taxonomy import Taxonomy, default_taxonomy

SKIPPED_KEY = "annotate_skipped"

st.title("Annotate failures")
user = require_user()
settings = get_settings()
store = get_store()
ws = workspace()


@st.cache_resource
def _taxonomy() -> Taxonomy:
    return default_taxonomy()


taxonomy = _taxonomy()
if not st.session_state.get("annotate_taxonomy_saved"):
    # Keep the rubric every label refers to, so old labels stay interpretable after edits.
    store.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())
    st.session_state["annotate_taxonomy_saved"] = True


if user.role in LEAD_ROLES:
    with st.expander("Queues and assignments", expanded=not store.queues.progress()):
        render_assignment_form(store, ws, user.name)
with st.expander("Progress per annotator", expanded=False):
    render_progress(store)

hide_setting = settings.hide_prelabel
hide_prelabel = st.toggle(
    "Hide the LLM pre-label until I commit", value=hide_setting, key="annotate_hide_prelabel",
    disabled=hide_setting,
    help="Against anchoring: the label records whether the pre-label was on screen."
         + (" This workspace always hides it." if hide_setting else ""),
)
st.caption(f"Keys: 1–{min(9, len(taxonomy.categories))} save that category · A accepts the "
           "pre-label · S skips. Blind mode is "
           + ("on: you never see other annotators' labels." if settings.blind else "off."))


def _next_item() -> None:
    """Re-run only the panel (the page around it stays as it is) to show the next item."""
    try:
        st.rerun(scope="fragment")
    except StreamlitAPIException:
        # The panel ran as part of a full-page run (first load, AppTest): rerun the page.
        st.rerun()


@st.fragment
def labelling_panel(me: User, hide: bool) -> None:
    failed_ids = list(failed_frame(ws)["id"])
    queue = queue_for(store, failed_ids, me.name, prelabel_threshold=settings.prelabel_threshold,
                      spot_check_share=settings.spot_check_share)
    skipped: list[str] = st.session_state.setdefault(SKIPPED_KEY, [])
    todo = [tid for tid in queue if tid not in skipped]
    render_last_saved(taxonomy)
    if not todo:
        if skipped and queue:
            st.info(f"You skipped {len(skipped)} item(s); nothing else is waiting.")
            if st.button("Revisit skipped items", key="annotate_revisit"):
                skipped.clear()
                st.rerun(scope="fragment")
        else:
            st.success("Your queue is empty. A lead assigns more work on this page.")
            if st.button("Take 25 unassigned failures", key="annotate_take"):
                n = take_unassigned(store, ws, me.name, 25)
                st.toast(f"{n} failures added to your queue" if n else "No unassigned failures")
                _next_item()
        return
    tid = todo[0]
    traj = load_trajectory(tid)
    if traj is None:
        st.error(f"Trajectory {escape_markdown(tid)} is assigned but not in this workspace.")
        return
    st.markdown(f"**Item 1 of {len(todo)} waiting** · trajectory `{tid}`")
    plain(traj.task.question)
    meta = {"intent": traj.task.intent, "scope": traj.task.scope, "run": traj.run.name,
            "model": traj.run.model, "template": traj.task.template_id}
    st.caption(" · ".join(f"{k}: {escape_markdown(str(v))}" for k, v in meta.items() if v))

    left, right = st.columns([3, 2], gap="medium")
    with right:
        render_visible_labels(store, tid, me, blind=settings.blind, taxonomy=taxonomy)
        outcome = render_label_form(store, traj, taxonomy, me, prelabel=prelabel_for(store, tid),
                                    hide_prelabel=hide)
        if outcome == "skipped":
            skipped.append(tid)
        if outcome is not None:
            _next_item()
        st.markdown("**Rubric**")
        render_rubric(taxonomy, height=420)
    with left:
        expand_all = st.toggle("Expand all steps", key=f"annotate_{tid}_expand")

        def pick_step(index: int, tid: str = tid) -> None:
            # Runs before the next script run, so the form's step picker shows the choice.
            st.session_state[f"lf_{tid}_step"] = index

        render_steps(traj.steps, expand_all=expand_all, pick=pick_step, key_prefix=tid)
        with st.expander("Answer vs ground truth", expanded=True):
            render_answer_panel(traj)


labelling_panel(user, hide_prelabel)
