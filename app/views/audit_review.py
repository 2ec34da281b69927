"""Validity audit, step 1: each annotator judges their tasks, blind.

Blind to models: nothing about agents (answers, trajectories, runs, success) is loaded here.
Blind to colleagues: only the signed-in person's own judgments are read, whatever their role.
Shortcuts (``keymap``): V = valid, I = invalid with the chosen reason, 1-5 = invalid for that
reason (C and R are taken by Streamlit itself), ``]``/``[`` = next/previous task. The judgment
sits above the task so it is on screen without scrolling; choosing an audit hands the keyboard
back to the page at once.
"""

from __future__ import annotations

import streamlit as st

from faillab.app.auth import require_user
from faillab.app.state import get_store
from faillab.app.widgets.audit_item import (
    load_context,
    pick_audit,
    reason_label,
    release_focus,
    render_item,
)
from faillab.app.widgets.key_help import key_help
from faillab.app.widgets.keymap import INVALID, ITEM_NEXT, ITEM_PREVIOUS, VALID, item_keys
from faillab.app.widgets.safe import escape_markdown
from labeling.audit import REASON_CODES, review_queue
from labeling.store import StoreError

st.title("Validity audit: review")
user = require_user()
store = get_store()

audit = pick_audit(store, key="audit_review_audit")
# The select box keeps the keyboard focus after a choice, and shortcuts typed into it would
# become search text: hand focus back to the page whenever the audit changes.
release_focus(f"audit-review:{audit}")

key_help([(VALID, "valid: no substantive issue"), (INVALID, "invalid (choose the reason below)"),
          *((str(i), f"invalid: {reason_label(code)}") for i, code in
            enumerate(REASON_CODES, start=1)), *item_keys("task")],
         clicks={ITEM_PREVIOUS: "audit_review_prev", ITEM_NEXT: "audit_review_next"})
queue = review_queue(store, audit, user.name)
if not queue:
    st.info("No task of this audit is assigned to you.")
    st.stop()
# Own judgments only: leads get everyone's from the store, which would unblind them here.
mine = {j.task_id: j for j in store.audits.judgments_visible_to(user.name, audit)
        if j.annotator == user.name and j.stage == "review"}
judged = {item.task_id for item in queue if item.task_id in mine}
done = len(judged)
st.progress(done / len(queue), text=f"Your progress: {done} of {len(queue)} judged")

pos_key = f"audit_review_pos_{audit}"
if pos_key not in st.session_state:
    # Resume at the first task this person has not judged yet.
    st.session_state[pos_key] = next(
        (i for i, item in enumerate(queue) if item.task_id not in judged), 0)
pos = min(max(int(st.session_state[pos_key]), 0), len(queue) - 1)
item = queue[pos]
key = f"{audit}_{item.task_id}"


def go(to: int) -> None:
    st.session_state[pos_key] = min(max(to, 0), len(queue) - 1)


def next_open(after: int) -> int:
    """The next unjudged task after ``after`` (wrapping), else simply the next one."""
    order = list(range(after + 1, len(queue))) + list(range(0, after))
    for i in order:
        if queue[i].task_id not in judged:
            return i
    return min(after + 1, len(queue) - 1)


nav = st.columns([4, 1, 1])
nav[0].caption(f"Task {pos + 1} of {len(queue)}")
nav[1].button("◀ Previous", key="audit_review_prev", disabled=pos == 0, on_click=go,
              args=(pos - 1,), help=f"Previous task ({ITEM_PREVIOUS})")
nav[2].button("Next ▶", key="audit_review_next", disabled=pos >= len(queue) - 1, on_click=go,
              args=(pos + 1,), help=f"Next task ({ITEM_NEXT})")

# Read, then judge: the task, its reference SQL and result come first and the judgment sits
# right under them, so a reviewer never scrolls back up to decide.
ctx = load_context(item.task_id)
if ctx is None:
    st.warning(f"Task {escape_markdown(item.task_id)} is not in this workspace (it was "
               "imported with judgments), so there is nothing to show for it.")
else:
    # The evidence queries fold (their titles say what they check), so the judgment stays
    # on a 1440x900 screen under the task, the reference SQL and its result.
    render_item(ctx, key, evidence_expanded=False)
st.divider()

st.subheader("Your judgment")
existing = mine.get(item.task_id)
if existing is not None:
    st.caption(f"Saved: {'valid' if existing.valid else 'invalid'} "
               f"({escape_markdown(reason_label(existing.reason))}). Saving again replaces it.")


def save(valid: bool) -> None:
    # A callback runs before the next script run: read the widgets' new values from session
    # state, not the variables of the run that drew them (those are one edit behind).
    reason = st.session_state.get(f"audit_reason_{key}")
    note = st.session_state.get(f"audit_note_{key}")
    if not valid and not reason:
        st.session_state[f"audit_msg_{key}"] = "Pick a reason code for an invalid judgment."
        return
    try:
        store.audits.record_judgment(audit, item.task_id, user.name, valid, reason=reason or None,
                                     note=(note or "").strip() or None)
    except StoreError as err:
        st.session_state[f"audit_msg_{key}"] = str(err)
        return
    st.session_state.pop(f"audit_msg_{key}", None)
    judged.add(item.task_id)
    st.session_state["audit_review_saved"] = (f"Saved task {item.task_id} as "
                                              f"{'valid' if valid else 'invalid'}.")
    go(next_open(pos))


def save_reason(code: str) -> None:
    st.session_state[f"audit_reason_{key}"] = code
    save(False)


buttons = st.columns([1, 1, 3])
# Neither button is drawn as the default: the saved judgment (if any) is the primary one.
buttons[0].button("Valid", key=f"audit_valid_{key}", shortcut=VALID,
                  type="primary" if existing is not None and existing.valid else "secondary",
                  icon=":material/check:", on_click=save, args=(True,),
                  help="No substantive issue (V)")
buttons[1].button("Invalid", key=f"audit_invalid_{key}", shortcut=INVALID,
                  type="primary" if existing is not None and not existing.valid else "secondary",
                  icon=":material/close:", on_click=save, args=(False,),
                  help="A concern that needs inspection, with the reason chosen below (I)")
buttons[2].caption("Or invalid for a reason in one key:")
# One row that wraps, each button as wide as its words: in five equal columns the reasons
# read "1 · Borderline te…" at 1280 px.
reasons = st.container(horizontal=True, key="audit_reason_keys")
for i, code in enumerate(REASON_CODES, start=1):
    reasons.button(f"{i} · {reason_label(code)}", key=f"audit_reason_key_{key}_{code}",
                   shortcut=str(i), on_click=save_reason, args=(code,),
                   help=f"Invalid: {reason_label(code)} ({i})", width="content")
options = list(REASON_CODES)
fields = st.columns([1, 2])
fields[0].selectbox(
    "Reason code (required when invalid)", options, format_func=reason_label,
    index=options.index(existing.reason) if existing and existing.reason in options else None,
    placeholder="No concern", key=f"audit_reason_{key}",
)
fields[1].text_area("Note", value=existing.note or "" if existing else "",
                    key=f"audit_note_{key}", height=90,
                    placeholder="What made you hesitate, in a sentence (optional).")
message = st.session_state.get(f"audit_msg_{key}")
if message:
    st.error(escape_markdown(str(message)))
saved = st.session_state.pop("audit_review_saved", None)
if saved:
    st.toast(escape_markdown(str(saved)))
if done == len(queue):
    st.success("You have judged every task assigned to you.")
