"""Work queues: per-annotator progress and, for leads and admins, creating assignments."""

from __future__ import annotations

import streamlit as st

from labeling.queue import create_assignments, failed_frame, queue_state
from labeling.store import Store, StoreError, Viewer
from labeling.store.records import Role
from trajectories.workspace import Workspace


def render_progress(store: Store, failed_ids: list[str], *, viewer: Viewer,
                    prelabel_threshold: float, spot_check_share: float,
                    left_to_machine: frozenset[str] | None = None) -> None:
    """One progress bar per annotator over the items they must label (done plus waiting); for a
    viewer who may not see counts over other people's work (an annotator in blind mode: the
    store decides) their own bar only.

    Assigned items routing by measured trust leaves to their labeller are not open work, so
    they are named apart instead of keeping a bar short of full forever.
    """
    progress = store.queues.progress(viewer=viewer)
    if not progress:
        st.caption("No assignments yet.")
        return
    for p in progress:
        state = queue_state(store, failed_ids, p.annotator,
                            prelabel_threshold=prelabel_threshold,
                            spot_check_share=spot_check_share, left_to_machine=left_to_machine)
        share = state.labelled / state.needed if state.needed else 1.0
        extra = (f" ({state.not_for_you} more assigned need no label: left to a trusted "
                 "labeller, or no longer failures)" if state.not_for_you else "")
        st.progress(min(1.0, share),
                    text=f"{p.annotator}: {state.labelled} of {state.needed} labelled{extra}")


def render_assignment_form(store: Store, ws: Workspace, actor: str) -> None:
    """Leads and admins assign failures to annotators (re-running only adds what is missing)."""
    people = [u.name for u in store.users.all()]
    n_failed = len(failed_frame(ws, store.verdicts.effective()))
    with st.form("assign_form", clear_on_submit=False):
        st.markdown(f"**Assign failures** ({n_failed:,} failed trajectories in this workspace)")
        default = [u.name for u in store.users.all() if u.role == Role.ANNOTATOR]
        annotators = st.multiselect("Annotators", people, default=default,
                                    key="assign_annotators")
        c1, c2, c3, c4 = st.columns(4)
        overlap = c1.number_input("Annotators on the overlap share", min_value=1, max_value=5,
                                  value=2, key="assign_overlap")
        share = c2.slider("Overlap share", 0.0, 1.0, 0.2, 0.05, key="assign_share",
                          help="Share of items (stratified by intent x scope) that get "
                               "several annotators, so agreement can be measured.")
        seed = c3.number_input("Seed", min_value=0, value=0, step=1, key="assign_seed")
        limit = c4.number_input("Only the first N failures (0 = all)", min_value=0, value=0,
                                step=10, key="assign_limit")
        submitted = st.form_submit_button("Create assignments")
    if not submitted:
        return
    if not annotators:
        st.error("Pick at least one annotator.")
        return
    try:
        created = create_assignments(store, ws, annotators, overlap=int(overlap),
                                     double_share=float(share), seed=int(seed),
                                     limit=int(limit) or None, actor=actor)
    except StoreError as err:
        st.error(str(err))
        return
    st.success(f"Created {created} new assignment(s).")
