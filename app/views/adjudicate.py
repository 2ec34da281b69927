"""Adjudicate (leads and admins): settle items where people disagree, or overrode a confident
LLM label. Every label, note and the pre-label rationale side by side; the decision needs a
reason, and a concurrent decision by another lead is detected instead of overwritten."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from faillab.app.auth import require_user
from faillab.app.state import get_settings, get_store, open_trajectory_link, workspace
from faillab.app.viewer import automatic_opinions_visible, viewer_of
from faillab.app.widgets.evidence import render_evidence
from faillab.app.widgets.label_form import step_caption
from faillab.app.widgets.rubric import category_label, render_rubric
from faillab.app.widgets.safe import escape_markdown, plain
from faillab.app.widgets.steps import render_steps
from labeling.queue import prelabel_for
from labeling.store import ConflictError, Label, StoreError
from labeling.store.history import history_table
from taxonomy import default_taxonomy
from trajectories.model import Trajectory

st.title("Adjudicate")
lead = require_user("lead", "admin")
settings = get_settings()
store = get_store()
ws = workspace()
taxonomy = default_taxonomy()

include_done = st.toggle("Include items already adjudicated", key="adj_include_done")
if (goto := st.session_state.pop("adj_goto", None)) is not None:
    # Set before the item picker exists in this run: after a decision, the next open item.
    st.session_state["adj_item"] = goto
    if "id" in st.query_params:
        del st.query_params["id"]
if (done_msg := st.session_state.pop("adj_done_msg", None)) is not None:
    st.success(done_msg, icon=":material/check:")
selected = st.session_state.get("adj_item")
# The item on screen stays listed after someone decides it, so a lead who is mid-decision
# sees the conflict message rather than the item vanishing under them.
listed = store.adjudications.disagreements(prelabel_threshold=settings.prelabel_threshold,
                                          viewer=viewer_of(lead), include_adjudicated=True)
items = [d for d in listed
         if include_done or not d.adjudicated or d.trajectory_id == selected]
if not items:
    st.success("Nothing to adjudicate: no disagreements and no overridden confident pre-labels.")
    st.stop()

KIND = {"humans_disagree": "annotators disagree",
        "llm_overridden": "confident pre-label overridden"}
st.dataframe(pd.DataFrame([{
    "trajectory": d.trajectory_id, "why": KIND[d.kind],
    "annotators": "; ".join(f"{who}: {category_label(taxonomy, c)}"
                            for who, c in d.human_categories.items()),
    # "pre-label", not "LLM": the offline heuristic makes them too.
    "pre-label": category_label(taxonomy, d.llm_category),
    "pre-label confidence": d.llm_confidence,
    "adjudicated": d.adjudicated,
} for d in items]), hide_index=True, key="adj_table")

by_id = {d.trajectory_id: d for d in items}
wanted = st.query_params.get("id")
ids = list(by_id)
tid = st.selectbox("Item", ids, index=ids.index(wanted) if wanted in ids else 0,
                   format_func=lambda t: f"{t[:12]} · {KIND[by_id[t].kind]}", key="adj_item")
assert tid is not None
item = by_id[tid]
traj: Trajectory | None = ws.get(tid)

head = st.columns([5, 1])
with head[0]:
    if traj is not None:
        plain(traj.task.question)
    st.caption(f"Trajectory {tid}")
if head[1].button("Open trajectory", key=f"adj_{tid}_open"):
    open_trajectory_link(tid)
render_evidence(traj, key=f"adj_{tid}",
                show_category=tid in automatic_opinions_visible(store, [tid], lead))


def _step_text(step: int | None) -> str:
    if step is None:
        return "not set"
    if traj is not None and 0 <= step < len(traj.steps):
        return step_caption(traj, step)
    return str(step)


if traj is not None:
    # The steps on this page, in their own scroll pane: the decision needs them side by side
    # with the labels, not a trip to the Trajectory page.
    with st.expander(f"Steps ({len(traj.steps)})", expanded=True), \
            st.container(height=420, border=False, key="adj_steps_pane", autoscroll=False):
        render_steps(traj.steps, expand_all=False, key_prefix=f"adj_{tid}")

# -- what everyone said ------------------------------------------------------------------------
labels = store.labels.for_item(tid, viewer=viewer_of(lead), include_llm=False)
latest: dict[str, Label] = {}
for lab in labels:  # oldest first: a re-label replaces the earlier one; history keeps both
    latest[str(lab.annotator)] = lab
prelabel = prelabel_for(store, tid)
cols = st.columns(max(1, len(latest) + (1 if prelabel else 0)))
for col, (who, lab) in zip(cols, latest.items(), strict=False):
    with col.container(border=True):
        st.markdown(f"**{escape_markdown(who)}**")
        st.markdown(f"Category: **{escape_markdown(category_label(taxonomy, lab.category))}**")
        secondary_name = category_label(taxonomy, lab.secondary_category)
        st.caption(f"Secondary: {escape_markdown(secondary_name)}")
        st.caption(f"First faulty step: {escape_markdown(_step_text(lab.first_error_step))}")
        st.caption("Pre-label was " + ("shown" if lab.prelabel_shown else "not shown")
                   + (f" · {lab.seconds_on_item:.0f} s on item"
                      if lab.seconds_on_item is not None else ""))
        plain(lab.note or "(no note)")
if prelabel is not None:
    with cols[-1].container(border=True):
        st.markdown(f"**Pre-label** ({escape_markdown(prelabel.labeller or 'LLM')})")
        st.markdown(f"Category: **{escape_markdown(category_label(taxonomy, prelabel.category))}**"
                    + (f" · confidence {prelabel.confidence:.2f}"
                       if prelabel.confidence is not None else ""))
        st.caption(f"First faulty step: {escape_markdown(_step_text(prelabel.first_error_step))}")
        plain(prelabel.rationale or "(no rationale)")

# -- the decision ------------------------------------------------------------------------------
current = store.adjudications.get(tid)
version_key = f"adj_{tid}_version"
if version_key not in st.session_state:
    # The version this lead was shown. A later save passes it back, so a decision another
    # lead made in between is reported instead of silently overwritten.
    st.session_state[version_key] = current.version if current else None
if current is not None:
    st.info(f"Current decision: {escape_markdown(category_label(taxonomy, current.category))} by "
            f"{escape_markdown(current.decided_by)} (version {current.version}). Reason: "
            f"{escape_markdown(current.reason)}")

keys = list(taxonomy.keys)
votes = Counter(item.human_categories.values())
suggested = current.category if current else (votes.most_common(1)[0][0] if votes else keys[0])
steps: list[int | None] = [None, *range(len(traj.steps) if traj else 0)]
left, right = st.columns([3, 2], gap="medium")
with left, st.form(f"adj_{tid}_form"):
    category = st.selectbox("Final category", keys,
                            index=keys.index(suggested) if suggested in keys else 0,
                            format_func=lambda k: category_label(taxonomy, k),
                            key=f"adj_{tid}_category")
    secondary = st.selectbox("Secondary category", [None, *keys],
                             format_func=lambda k: "none" if k is None
                             else category_label(taxonomy, k), key=f"adj_{tid}_secondary")
    step = st.selectbox("First faulty step", steps, format_func=_step_text,
                        key=f"adj_{tid}_step")
    reason = st.text_area("Reason (required)", key=f"adj_{tid}_reason",
                          placeholder="Why this label? Cite the rubric rule or the step.")
    submitted = st.form_submit_button("Save decision", type="primary")
with right, st.expander("Rubric", expanded=False):
    render_rubric(taxonomy, height=400)
if submitted:
    if not reason.strip():
        st.error("A decision needs a reason.")
    else:
        try:
            saved = store.adjudications.decide(tid, category, reason, lead.name,
                                               expected_version=st.session_state[version_key],
                                               secondary_category=secondary, first_error_step=step)
        except ConflictError as err:
            st.error(f"Not saved: {err}")
        except StoreError as err:
            st.error(str(err))
        else:
            st.session_state[version_key] = saved.version
            msg = (f"Saved: {escape_markdown(category_label(taxonomy, saved.category))} for "
                   f"{tid[:12]} (version {saved.version}).")
            # On to the next item nobody has decided yet (after this one, then from the top).
            after = ids[ids.index(tid) + 1:] + ids[:ids.index(tid)]
            nxt = next((t for t in after if not by_id[t].adjudicated), None)
            if nxt is None:
                st.success(msg + " No open disagreement is left.")
            else:
                st.session_state["adj_goto"] = nxt
                st.session_state["adj_done_msg"] = msg + " Showing the next open item."
                st.rerun()
if st.button("Reload", key=f"adj_{tid}_reload", help="Show the latest decision and decide again."):
    st.session_state.pop(version_key, None)
    st.rerun()

# -- history -----------------------------------------------------------------------------------
st.subheader("History")
entries = [h for h in store.history.entries(entity_id=tid) if h.entity in ("label", "adjudication")]
rows = history_table(entries, lambda key: category_label(taxonomy, key))
st.dataframe(pd.DataFrame(rows), hide_index=True,
             key=f"adj_{tid}_history")
