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
from faillab.app.widgets.adjudication import (
    OTHER_KEY,
    PRELABEL_KEY,
    REASON_BOX,
    Opinion,
    decision_keys,
    field_keys,
    render_cards,
)
from faillab.app.widgets.evidence import render_evidence
from faillab.app.widgets.key_help import key_help
from faillab.app.widgets.label_form import step_caption
from faillab.app.widgets.rubric import category_label, render_rubric
from faillab.app.widgets.safe import escape_markdown, plain
from faillab.app.widgets.steps import render_steps
from labeling.queue import prelabel_for
from labeling.store import ConflictError, Label, StoreError
from labeling.store.history import history_table
from labeling.store.records import Role
from taxonomy import default_taxonomy
from trajectories.model import Trajectory

st.title("Adjudicate")
lead = require_user(Role.LEAD, Role.ADMIN)
settings = get_settings()
store = get_store()
ws = workspace()
taxonomy = default_taxonomy()

# The decision screen needs the height Streamlit leaves empty above the first element.
st.html("<style>[data-testid='stMainBlockContainer'] { padding-top: 1.25rem !important; }"
        "</style>")
pick, position, options = st.columns([4, 1, 2], vertical_alignment="bottom")
include_done = options.toggle("Include adjudicated", key="adj_include_done")
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
by_id = {d.trajectory_id: d for d in items}
wanted = st.query_params.get("id")
ids = list(by_id)
tid = pick.selectbox("Item", ids, index=ids.index(wanted) if wanted in ids else 0,
                     format_func=lambda t: f"{t[:12]} · {KIND[by_id[t].kind]}", key="adj_item")
assert tid is not None
item = by_id[tid]
traj: Trajectory | None = ws.get(tid)
position.caption(f"{ids.index(tid) + 1} of {len(ids)} · "
                 f"{sum(not d.adjudicated for d in items)} open")

head = st.columns([6, 1, 1], vertical_alignment="center")
with head[0]:
    if traj is not None:
        plain(traj.task.question)
    st.caption(f"Trajectory {tid}")
if head[1].button("Open", key=f"adj_{tid}_open", help="Open the trajectory"):
    open_trajectory_link(tid)


def _step_text(step: int | None) -> str:
    if step is None:
        return "not set"
    if traj is not None and 0 <= step < len(traj.steps):
        return step_caption(traj, step)
    return str(step)


# -- what everyone said, each a key away from the decision ---------------------------------------
labels = store.labels.for_item(tid, viewer=viewer_of(lead), include_llm=False)
latest: dict[str, Label] = {}
for lab in labels:  # oldest first: a re-label replaces the earlier one; history keeps both
    latest[str(lab.annotator)] = lab
prelabel, _ = prelabel_for(store, tid, viewer_of(lead))
opinions = [Opinion(
    title=f"Rater {chr(ord('A') + i)}: {who}", category=lab.category,
    secondary=lab.secondary_category, step=lab.first_error_step, note=lab.note,
    detail="pre-label was " + ("shown" if lab.prelabel_shown else "not shown")
           + (f" · {lab.seconds_on_item:.0f} s on item" if lab.seconds_on_item is not None
              else ""),
    shortcut=str(i + 1)) for i, (who, lab) in enumerate(list(latest.items())[:9])]
if prelabel is not None:
    opinions.append(Opinion(
        title=f"Pre-label ({prelabel.labeller or 'LLM'})", category=prelabel.category,
        secondary=prelabel.secondary_category, step=prelabel.first_error_step,
        note=prelabel.rationale,
        detail=f"confidence {prelabel.confidence:.2f}" if prelabel.confidence is not None
        else "", shortcut=PRELABEL_KEY))
key_help(decision_keys(min(9, len(latest)), prelabel is not None),
         where=head[2], focus=REASON_BOX,
         focus_after_keys=[o.shortcut for o in opinions] + [OTHER_KEY])
none_col = render_cards(tid, opinions, taxonomy)

# -- the decision, right under the cards ---------------------------------------------------------
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
fields = field_keys(tid)
if fields["category"] not in st.session_state:
    # Opens on the standing decision, else the raters' majority; a take key replaces it.
    votes = Counter(item.human_categories.values())
    st.session_state[fields["category"]] = (current.category if current else
                                            votes.most_common(1)[0][0] if votes else None)
steps: list[int | None] = [None, *range(len(traj.steps) if traj else 0)]
taken = st.session_state.get(fields["taken"])
with none_col:
    st.caption(f"Taken from {escape_markdown(taken)}: check it, write the reason, press Enter."
               if taken else "Take a rater's label by its key, or choose below.")
with st.form(f"adj_{tid}_form", border=True):
    cells = st.columns([2, 2, 3], gap="small")
    category = cells[0].selectbox("Final category", keys, index=None,
                                  format_func=lambda k: category_label(taxonomy, k),
                                  placeholder="choose a category", key=fields["category"])
    secondary = cells[1].selectbox("Secondary category", [None, *keys],
                                   format_func=lambda k: "none" if k is None
                                   else category_label(taxonomy, k), key=fields["secondary"])
    step = cells[2].selectbox("First faulty step", steps, format_func=_step_text,
                              key=fields["step"])
    reason = st.text_input("Reason (required; Enter saves)", key=fields["reason"],
                           placeholder="Why this label? Cite the rubric rule or the step.")
    submitted = st.form_submit_button("Save decision", type="primary")
if submitted:
    if not reason.strip():
        st.error("A decision needs a reason.")
    elif category is None:
        st.error("Choose the final category (or take a rater's with its key).")
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
with st.expander("Rubric", expanded=False):
    render_rubric(taxonomy, height=400)

# -- the trajectory, below the decision -----------------------------------------------------------
render_evidence(traj, key=f"adj_{tid}",
                show_category=tid in automatic_opinions_visible(store, [tid], lead))
if traj is not None:
    with st.expander(f"Steps ({len(traj.steps)})", expanded=False), \
            st.container(height=420, border=False, key="adj_steps_pane", autoscroll=False):
        render_steps(traj.steps, expand_all=False, key_prefix=f"adj_{tid}")
with st.expander(f"All {len(items)} items", expanded=False):
    st.dataframe(pd.DataFrame([{
        "trajectory": d.trajectory_id[:12], "why": KIND[d.kind],
        "annotators": "; ".join(f"{who}: {category_label(taxonomy, c)}"
                                for who, c in d.human_categories.items()),
        # "pre-label", not "LLM": the offline heuristic makes them too.
        "pre-label": category_label(taxonomy, d.llm_category)
        + (f" ({d.llm_confidence:.2f})" if d.llm_confidence is not None else ""),
        "adjudicated": d.adjudicated,
    } for d in items]), hide_index=True, key="adj_table", width="stretch")

# -- history -----------------------------------------------------------------------------------
st.subheader("History")
entries = [h for h in store.history.entries(entity_id=tid) if h.entity in ("label", "adjudication")]
rows = history_table(entries, lambda key: category_label(taxonomy, key))
st.dataframe(pd.DataFrame(rows), hide_index=True,
             key=f"adj_{tid}_history")
