"""Validity audit, step 2: a lead settles the tasks whose reviewers disagree.

Optimistic locking: the verdict version this lead was shown is kept in session state and sent
with the decision, so a colleague's concurrent decision is reported ("changed by X, reload")
instead of being silently overwritten.
"""

from __future__ import annotations

import streamlit as st

from faillab.app.auth import require_user
from faillab.app.state import get_store
from faillab.app.widgets.audit_item import load_context, pick_audit, reason_label, render_item
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.audit import REASON_CODES, audit_disagreements
from labeling.store import ConflictError, StoreError
from labeling.store.records import Role

st.title("Validity audit: adjudication")
user = require_user(Role.LEAD, Role.ADMIN)
store = get_store()

audit = pick_audit(store, key="audit_adj_audit")

disagreements = audit_disagreements(store, audit)
n_open = sum(1 for d in disagreements if d.verdict is None)
c1, c2 = st.columns(2)
c1.metric("Disagreements", len(disagreements))
c2.metric("Still open", n_open)
if not disagreements:
    st.info("The reviewers agree on every task judged so far: nothing to adjudicate.")
    st.stop()

only_open = st.toggle("Only open disagreements", value=n_open > 0, key="audit_adj_only_open")
shown = [d for d in disagreements if d.verdict is None] if only_open else disagreements
if not shown:
    st.success("Every disagreement has a verdict.")
    st.stop()
by_id = {d.item.task_id: d for d in shown}
task_id = st.selectbox(
    "Task", list(by_id), key="audit_adj_task",
    format_func=lambda t: f"{t} ({'decided' if by_id[t].verdict else 'open'})",
)
assert task_id is not None
case = by_id[task_id]
key = f"{audit}_{task_id}"
version_key = f"audit_adj_version_{key}"
if version_key not in st.session_state:
    # The version this lead is looking at; checked by the store when the decision is saved.
    st.session_state[version_key] = case.verdict.version if case.verdict else None

st.subheader("Reviews")
cols = st.columns(len(case.reviews))
for col, review in zip(cols, case.reviews, strict=True):
    with col, st.container(border=True):
        st.markdown(f"**{escape_markdown(review.annotator)}**: "
                    f"{'valid' if review.valid else 'invalid'}")
        st.caption(escape_markdown(reason_label(review.reason)))
        plain(review.note or "(no note)")

if case.verdict is not None:
    v = case.verdict
    st.info(f"Current verdict (version {v.version}) by {escape_markdown(v.decided_by)}: "
            f"{'valid' if v.valid else 'invalid'}, {escape_markdown(reason_label(v.reason))}.")

with st.expander("Task, reference SQL, result and evidence", expanded=True):
    ctx = load_context(task_id)
    if ctx is None:
        st.warning("This task is not in the workspace (imported with judgments).")
    else:
        render_item(ctx, f"adj_{key}", evidence_expanded=False)

st.subheader("Decision")
decision = st.radio("Verdict", ["valid", "invalid"], horizontal=True, index=None,
                    key=f"audit_adj_valid_{key}")
reason = st.selectbox("Reason (required)", list(REASON_CODES), index=None,
                      format_func=reason_label, key=f"audit_adj_reason_{key}",
                      placeholder="Pick the reason behind the decision")
note = st.text_area("Note", key=f"audit_adj_note_{key}", height=80)
if st.button("Save decision", key=f"audit_adj_save_{key}", type="primary"):
    if decision is None or reason is None:
        st.error("Pick a verdict and a reason.")
    else:
        try:
            saved = store.audits.decide(
                audit, task_id, user.name, valid=decision == "valid", reason=reason,
                note=note.strip() or None, expected_version=st.session_state[version_key])
        except ConflictError as err:
            st.error(f"Not saved: {escape_markdown(str(err))}.")
            st.session_state[f"audit_adj_conflict_{key}"] = True
        except StoreError as err:
            st.error(escape_markdown(str(err)))
        else:
            st.session_state[version_key] = saved.version
            st.success(f"Saved: {decision} (version {saved.version}).")
if st.session_state.get(f"audit_adj_conflict_{key}") and st.button(
        "Reload the current verdict", key=f"audit_adj_reload_{key}"):
    st.session_state.pop(version_key, None)
    st.session_state.pop(f"audit_adj_conflict_{key}", None)
    st.rerun()
