"""Undo on the Annotate screen: retract the label saved last and reopen its item.

The store keeps the retracted label as history (who retracted it, when) and counts it nowhere,
so the item is back in the annotator's queue and their progress drops by one; undo again walks
further back through this session's saves.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from faillab.app.widgets.keymap import UNDO, UNDO_TOO
from faillab.app.widgets.label_form import (
    ACCEPT_STEP,
    CURSOR,
    NOTE,
    SECONDARY,
    SEEN,
    set_step,
    start_form,
)
from faillab.app.widgets.rubric import category_label
from labeling.store import Label, Store, StoreError, User
from taxonomy import Taxonomy

#: Items this session saved, newest last (what U/Z walks back through).
DONE_KEY = "annotate_done"
#: The item whose label was just undone: it opens first (it is back in the queue), or as a
#: revisit when an earlier label of the person's on it counts again.
UNDONE_KEY = "annotate_undone"
REVISIT_KEY = "annotate_revisit"
NOTE_KEY = "annotate_undo_note"
UNDO_TWIN_KEY = "annotate_undo_z"


def undo_label(store: Store, me: User, taxonomy: Taxonomy, back_tid: str) -> None:
    """Button callback: runs before the next script run, which then shows the reopened item."""
    done: list[str] = st.session_state.setdefault(DONE_KEY, [])
    try:
        gone = store.labels.retract_latest(back_tid, annotator=me.name)
    except StoreError as err:
        st.session_state[NOTE_KEY] = f"Undo failed: {err}"
        return
    if back_tid in done:
        done.remove(back_tid)
    st.session_state.pop("annotate_last_saved", None)
    st.session_state.pop(REVISIT_KEY, None)
    st.session_state[UNDONE_KEY] = back_tid
    if gone is not None:
        _restore_form(back_tid, gone)
    what = category_label(taxonomy, gone.category) if gone is not None else "nothing"
    st.session_state[NOTE_KEY] = (f"Undone: your label {what} on {back_tid[:12]} no longer "
                                  "counts (kept in the history); the item is open again.")


def _restore_form(trajectory_id: str, gone: Label) -> None:
    """The reopened item's form as the undone label had it: its first faulty step marked (or
    the pre-label's step ticked, if that is where it came from) with the cursor on it, its
    secondary category and note; only the category key remains to press again."""
    start_form(trajectory_id)
    state = st.session_state
    step = gone.first_error_step
    if gone.step_from_prelabel:
        state[ACCEPT_STEP] = True
    else:
        set_step(step)
    if step is not None:
        state[CURSOR] = step
        state[SEEN] = (step,)
    state[SECONDARY] = gone.secondary_category
    state[NOTE] = gone.note or ""


def render_undo(store: Store, me: User, taxonomy: Taxonomy, *, enabled: bool = True,
                container: DeltaGenerator | None = None) -> None:
    """The Undo button (U) and its hidden twin (Z); disabled when nothing is left to undo."""
    done: list[str] = st.session_state.setdefault(DONE_KEY, [])
    back = done[-1] if done and enabled else None
    where = container if container is not None else st
    args = (store, me, taxonomy, back)
    where.button("Undo", key="annotate_undo", shortcut=UNDO, icon=":material/undo:",
                 disabled=back is None, width="stretch", on_click=undo_label, args=args,
                 help=f"Retract the label you saved last ({UNDO} or {UNDO_TOO}) and reopen "
                      "its item: the label stays in the history but no longer counts.")
    # Z undoes too; a hidden twin keeps one button on screen (hidden here, where it is made:
    # the empty-queue screen showed it beside the real one).
    st.html(f"<style>.st-key-{UNDO_TWIN_KEY} {{ display: none; }}</style>")
    with st.container(key=UNDO_TWIN_KEY):
        st.button(f"Undo ({UNDO_TOO})", key="annotate_undo_alias", shortcut=UNDO_TOO,
                  disabled=back is None, on_click=undo_label, args=args)


def render_undo_note() -> None:
    if note := st.session_state.pop(NOTE_KEY, None):
        st.info(note, icon=":material/undo:")
