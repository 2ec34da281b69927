"""Validity audit, step 2: a lead settles the tasks whose reviewers disagree.

Optimistic locking: the verdict version this lead was shown is kept in session state and sent
with the decision, so a colleague's concurrent decision is reported ("changed by X, reload")
instead of being silently overwritten.
"""

from __future__ import annotations

import streamlit as st

from faillab.app.auth import require_user
from faillab.app.state import get_store
from faillab.app.widgets.audit_decision import (
    INVALID_KEY,
    TAKE_KEYS,
    VALID_KEY,
    concern,
    outcome,
    reason_keys,
    rule_line,
    verdict_text,
)
from faillab.app.widgets.audit_item import (
    load_context,
    pick_audit,
    reason_label,
    release_focus,
    render_item,
)
from faillab.app.widgets.key_help import key_help
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.audit import REASON_CODES, audit_disagreements
from labeling.store import ConflictError, StoreError
from labeling.store.records import Role

st.title("Validity audit: adjudication")
user = require_user(Role.LEAD, Role.ADMIN)
store = get_store()

audit = pick_audit(store, key="audit_adj_audit")
# A select box keeps the focus after a choice; the keys below must reach the page.
release_focus(f"audit-adjudicate:{audit}")
key_help([(VALID_KEY, "valid (no reason needed)"),
          (INVALID_KEY, "invalid, for the reviewers' reason or the one chosen"),
          *((k, f"take reviewer {k}'s judgment") for k in TAKE_KEYS[:2]), *reason_keys()])

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

# Read, then decide: the task, its reference SQL and result first, both judgements under
# them, the keys right below (a decision is one key, not four clicks on a form below the fold).
ctx = load_context(task_id)
if ctx is None:
    st.warning("This task is not in the workspace (imported with judgments).")
else:
    render_item(ctx, f"adj_{key}", evidence_expanded=False)

reviews = case.reviews[:len(TAKE_KEYS)]
cols = st.columns(len(reviews))
for col, letter, review in zip(cols, TAKE_KEYS, reviews, strict=False):
    with col, st.container(border=True):
        st.markdown(f"**{letter} · {escape_markdown(review.annotator)}**: "
                    f"{'valid' if review.valid else 'invalid'}")
        st.caption(escape_markdown(reason_label(review.reason)))
        plain(review.note or "(no note)")

if case.verdict is not None:
    v = case.verdict
    st.info(f"Current verdict (version {v.version}) by {escape_markdown(v.decided_by)}: "
            f"{escape_markdown(verdict_text(v.valid, v.reason))}.")

message_key, conflict_key = f"audit_adj_msg_{key}", f"audit_adj_conflict_{key}"


def decide(choice: str, reason_code: str | None = None) -> None:
    """Save what the key decides; a reason the rule needs and nobody gave is asked for, and
    nothing is saved. A callback reads the boxes' new values from session state."""
    chosen = reason_code or st.session_state.get(f"audit_adj_reason_{key}")
    result = outcome(choice, reviews, chosen)
    if result.reason is None:
        st.session_state[message_key] = ("An invalid verdict needs a reason code: press 1-5 "
                                         "or choose it in the box.")
        return
    note = str(st.session_state.get(f"audit_adj_note_{key}") or "").strip() or None
    try:
        saved = store.audits.decide(audit, task_id, user.name, valid=result.valid,
                                    reason=result.reason, note=note,
                                    expected_version=st.session_state[version_key])
    except ConflictError as err:
        st.session_state[message_key] = f"Not saved: {err}."
        st.session_state[conflict_key] = True
        return
    except StoreError as err:
        st.session_state[message_key] = str(err)
        return
    st.session_state[version_key] = saved.version
    st.session_state.pop(message_key, None)
    st.session_state["audit_adj_saved"] = (f"Saved {task_id}: "
                                           f"{verdict_text(result.valid, result.reason)} "
                                           f"(version {saved.version}).")


st.subheader("Decision")
st.caption(escape_markdown(rule_line(reviews)))
keys = st.container(horizontal=True, key="audit_adj_keys")
keys.button("Valid", key=f"audit_adj_valid_{key}", shortcut=VALID_KEY, on_click=decide,
            args=(VALID_KEY,), icon=":material/check:", help="Valid: no reason needed (V)")
keys.button("Invalid", key=f"audit_adj_invalid_{key}", shortcut=INVALID_KEY, on_click=decide,
            args=(INVALID_KEY,), icon=":material/close:",
            help="Invalid, for the reason below (I)")
for letter, review in zip(TAKE_KEYS, reviews, strict=False):
    keys.button(f"Take {letter} ({review.annotator})", key=f"audit_adj_take_{letter}_{key}",
                shortcut=letter, on_click=decide, args=(letter,),
                help=f"{review.annotator}'s judgment and reason ({letter})")
codes = st.container(horizontal=True, key="audit_adj_reason_keys")
for i, code in enumerate(REASON_CODES, start=1):
    codes.button(f"{i} · {reason_label(code)}", key=f"audit_adj_code_{key}_{code}",
                 shortcut=str(i), on_click=decide, args=(INVALID_KEY, code), width="content",
                 help=f"Invalid: {reason_label(code)} ({i})")
fields = st.columns([1, 2])
pre = concern(reviews)
fields[0].selectbox("Reason (required for invalid)", list(REASON_CODES),
                    index=REASON_CODES.index(pre) if pre in REASON_CODES else None,
                    format_func=reason_label, key=f"audit_adj_reason_{key}",
                    placeholder="the reviewers' reason, or pick one")
fields[1].text_area("Note (optional)", key=f"audit_adj_note_{key}", height=80)
if st.session_state.get(message_key):
    st.error(escape_markdown(str(st.session_state[message_key])))
saved_text = st.session_state.pop("audit_adj_saved", None)
if saved_text:
    st.success(escape_markdown(str(saved_text)))
if st.session_state.get(conflict_key) and st.button(
        "Reload the current verdict", key=f"audit_adj_reload_{key}"):
    st.session_state.pop(version_key, None)
    st.session_state.pop(conflict_key, None)
    st.session_state.pop(message_key, None)
    st.rerun()
