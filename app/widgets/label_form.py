"""The failure-label form: primary and secondary category, first faulty step, note.

Keyboard-first: number keys 1..9 save the label with that primary category (and the first faulty
step marked with the step cursor), A accepts the LLM pre-label (with its step when the annotator
has had that step on screen), S skips. The widgets keep their keys from item to item, so the
browser updates them in place instead of mounting a new form on every label key (two
selectboxes, a text area and eight buttons were remounted each time); their values are reset
whenever another item is shown, before they are drawn, so a half-filled form never carries over.
The one exception is the step picker, which takes a fresh key whenever the mark changes from
outside it (see set_step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from faillab.app.viewer import viewer_of
from faillab.app.widgets.evidence import step_note
from faillab.app.widgets.keymap import ACCEPT_PRELABEL, SKIP
from faillab.app.widgets.rubric import category_label
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.queue import prelabel_for
from labeling.store import LlmOpinion, Store, StoreError, StoreUnavailableError, User
from labeling.store.records import Role
from taxonomy import Taxonomy
from trajectories.model import Step, Trajectory
from trajectories.render import preview

ACCEPT_KEY, SKIP_KEY = ACCEPT_PRELABEL, SKIP
#: Which item the form's values belong to.
FORM_ITEM = "lf_item"
#: The form's fields and the values every item starts with. STEP is the marked first faulty
#: step itself (a plain session value, no widget's); the picker showing it is keyed apart.
STEP, ACCEPT_STEP, SECONDARY, NOTE = "lf_step", "lf_accept_step", "lf_secondary", "lf_note"
#: Which generation of the step picker is drawn (see set_step).
PICKER_GENERATION = "lf_step_picker"
#: The step cursor's "mark this step" button (F).
MARK_BUTTON = "annotate_step_mark"
#: Annotate's step cursor and the steps it has drawn in full on this item (see step_cursor).
CURSOR, SEEN = "lf_cursor", "lf_seen_steps"
#: The item whose last key the store could not save (down, full, locked): it is shown first
#: again, with that message, whatever order the queue has when the store is back.
UNSAVED = "lf_unsaved"
#: The address parameter (?item=) naming the item Annotate shows, so a new session opens on it.
ITEM_PARAM = "item"
FIELD_DEFAULTS: dict[str, object] = {STEP: None, ACCEPT_STEP: False, SECONDARY: None, NOTE: "",
                                     CURSOR: None, SEEN: ()}


@dataclass(frozen=True)
class Saved:
    """What the annotator just committed; shown on the next item (with a hidden pre-label)."""

    trajectory_id: str
    category: str
    prelabel: LlmOpinion | None
    prelabel_was_hidden: bool


def is_agent_step(step: Step) -> bool:
    """Only the agent's own steps (its messages, thinking, SQL, code and tool calls) can be the
    first faulty step: a user's message, a system prompt or a tool's reply is what the agent
    was given, not something it did."""
    return step.role == "assistant"


def step_caption(traj: Trajectory, index: int) -> str:
    """"i. kind preview" for the faulty-step picker (plain text: a selectbox shows no markup)."""
    step = traj.steps[index]
    body = step.code or step.arguments or step.content or step.observation or ""
    kind = step.kind.value if hasattr(step.kind, "value") else str(step.kind)
    name = f" {step.name}" if step.name else ""
    flag = " [error]" if step.error else ""
    return f"{index}. {kind}{name}{flag} · {preview(body, 70)}"


def start_form(trajectory_id: str) -> None:
    """Empty the form when it shows another item than last time (set, not deleted: a value
    set through the session reaches the widget the browser keeps mounted)."""
    state = st.session_state
    if state.get(FORM_ITEM) != trajectory_id:
        for key, value in FIELD_DEFAULTS.items():
            state[key] = value
        set_step(None)
        state[FORM_ITEM] = trajectory_id


def step_picker_key() -> str:
    """The session key of the step picker drawn now."""
    return f"{STEP}_pick_{int(st.session_state.get(PICKER_GENERATION, 0))}"


def set_step(step: int | None) -> None:
    """Mark ``step`` as the first faulty one, from anywhere but the picker itself.

    The picker shows the mark under a key of its own, and a mark set elsewhere (F, a new item)
    gives it a fresh key. A key pressed right after F can reach the server before the browser
    has drawn the picker's new value; it then sends the picker's old value, which under the
    old key no longer counts (one shared key let that stale value erase the mark, and the label
    was saved without its step)."""
    state = st.session_state
    state[STEP] = step
    if state.get(step_picker_key()) != step:
        state[PICKER_GENERATION] = int(state.get(PICKER_GENERATION, 0)) + 1


def _picked(picker_key: str) -> None:
    st.session_state[STEP] = st.session_state.get(picker_key)


def seen_steps() -> tuple[int, ...]:
    """The steps drawn in full on the current item so far (by Annotate's step cursor)."""
    seen = st.session_state.get(SEEN)
    return tuple(seen) if isinstance(seen, tuple) else ()


def started_at(trajectory_id: str) -> float:
    """When this session first showed the item; time on item counts from here."""
    key = f"lf_{trajectory_id}_shown_at"
    if key not in st.session_state:
        st.session_state[key] = time.monotonic()
    return float(st.session_state[key])


def render_visible_labels(store: Store, trajectory_id: str, viewer: User, *, blind: bool,
                          taxonomy: Taxonomy) -> None:
    """Labels already on the item that `viewer` may see; the store decides which."""
    labels = store.labels.for_item(trajectory_id, viewer=viewer_of(viewer), include_llm=False)
    if not labels:
        return
    st.caption("Labels already on this item" + (" (yours only: blind mode)" if blind and
                                                  viewer.role == Role.ANNOTATOR else ""))
    st.dataframe(pd.DataFrame([{
        "annotator": lab.annotator, "category": category_label(taxonomy, lab.category),
        "secondary": category_label(taxonomy, lab.secondary_category),
        "first faulty step": lab.first_error_step, "note": lab.note or "",
    } for lab in labels]), hide_index=True, key=f"lf_{trajectory_id}_existing")


def _prelabel_box(prelabel: LlmOpinion, taxonomy: Taxonomy, *, seen: bool,
                  traj: Trajectory) -> None:
    conf = f" · confidence {prelabel.confidence:.2f}" if prelabel.confidence is not None else ""
    step = ""
    if prelabel.first_error_step is not None:
        # Accept takes the step only once the person has read it (it anchors otherwise).
        step = (f" · step {prelabel.first_error_step}"
                + (" (seen: Accept takes it)" if seen else " (not yet seen: Accept leaves it)"))
    with st.container(border=True):
        name = escape_markdown(category_label(taxonomy, prelabel.category))
        # Which labeller made it: the offline heuristic's guesses read "LLM pre-label" too.
        who = escape_markdown(prelabel.labeller or "LLM")
        st.markdown(f"**Pre-label ({who}):** {name}{conf}{step}")
        # The evidence box above names a step too: say how the two stand, never leave two
        # machine steps side by side unexplained.
        note = step_note(traj, prelabel.first_error_step)
        if note is not None or prelabel.rationale:
            # The note and a long rationale scroll in place together, so the buttons below
            # keep their position and stay on a 1280x800 screen.
            with st.container(height=72, border=False, key="lf_rationale"):
                if note is not None:
                    st.caption(note)
                if prelabel.rationale:
                    plain(prelabel.rationale, caption=True)


def render_label_form(store: Store, traj: Trajectory, taxonomy: Taxonomy, user: User, *,
                      prelabel: LlmOpinion | None, hide_prelabel: bool,
                      hooks: Hooks | None = None) -> list[DeltaGenerator]:
    """The form for one item; `hooks` hear of a save or a skip. Returns the row of Skip: its
    other two cells are free for the page's buttons. `prelabel` is what the store shows this
    person (None: none, or hidden); `hide_prelabel` says one exists that is hidden."""
    tid = str(traj.id)
    start_form(tid)
    started_at(tid)
    show_prelabel = prelabel is not None and not hide_prelabel
    if hide_prelabel:
        st.caption("The LLM pre-label is hidden until you commit, so it cannot anchor you.")
    elif prelabel is None:
        st.caption("No LLM pre-label for this item.")
    if show_prelabel:
        assert prelabel is not None
        _prelabel_box(prelabel, taxonomy, seen=prelabel.first_error_step in seen_steps(),
                      traj=traj)

    steps: list[int | None] = [None, *(i for i, s in enumerate(traj.steps) if is_agent_step(s))]
    pick_col, second_col = st.columns(2, gap="small")
    # Never prefilled from the pre-label: a step is stored only when the person chose it, or
    # ticked the box below to accept the pre-label's step (recorded as such).
    marked = st.session_state.get(STEP)
    picker = step_picker_key()
    step = pick_col.selectbox(
        "First faulty step", steps,
        # No mark: no selection, which the box shows as its placeholder (saying the same).
        index=steps.index(marked) if marked is not None and marked in steps else None,
        format_func=lambda i: "not set" if i is None else step_caption(traj, i),
        key=picker, on_change=_picked, args=(picker,), placeholder="not set",
        help="The earliest step where the trajectory went wrong.",
    )
    if show_prelabel and prelabel is not None and prelabel.first_error_step in steps[1:]:
        st.checkbox(
            f"Use the pre-label's first faulty step ({prelabel.first_error_step})",
            key=ACCEPT_STEP, disabled=step is not None,
            help="Only when you checked it: the label records that the step came from the "
                 "pre-label. A step chosen above wins.")
    keys = list(taxonomy.keys)
    second_col.selectbox("Secondary category (optional)", [None, *keys],
                             format_func=lambda k: "none" if k is None
                             else category_label(taxonomy, k),
                             key=SECONDARY, placeholder="none")
    st.text_area("Note", key=NOTE, height=68,
                        placeholder="Why this category? (optional; Ctrl+Enter keeps it and "
                                    "gives the keys back)")

    # Saving happens in the buttons' callbacks, before the next script run: that run already
    # shows the next item (one run per key press instead of a save run plus a rerun).
    hooks = hooks or Hooks()
    args = (store, traj, taxonomy, user, prelabel, hide_prelabel, hooks)
    if error := st.session_state.pop(f"lf_{tid}_error", None):
        st.error(error)
    if show_prelabel:
        assert prelabel is not None
        st.button("Accept pre-label", key="lf_accept", type="primary",
                  shortcut=ACCEPT_KEY, width="stretch", on_click=_save,
                  args=(*args, prelabel.category), kwargs={"accept": True},
                  help="Save the LLM's category with the secondary and note above, and its "
                       "first faulty step if you have seen that step (or the one you marked).")
    st.caption("Primary category: press its number to save")
    grid = st.columns(2, gap="small")
    for number, cat in enumerate(taxonomy.categories[:9], start=1):
        # Streamlit shows the shortcut (the number) on the button itself.
        grid[(number - 1) % 2].button(cat.name, key=f"lf_cat_{cat.key}",
                                      shortcut=str(number), width="stretch",
                                      help=cat.definition, on_click=_save,
                                      args=(*args, cat.key))
    # Skip shares its row with the page's own buttons (Undo, Back), which go in the other cells.
    nav = st.columns(3, gap="small")
    nav[0].button("Skip", key="lf_skip", shortcut=SKIP_KEY, width="stretch",
                  icon=":material/skip_next:", help="Put this item aside for now (S).",
                  on_click=hooks.skipped, args=(tid,))
    return list(nav)


@dataclass(frozen=True)
class Hooks:
    """What the page does after a save or a skip (both run inside the button's callback)."""

    saved: Callable[[str], None] = lambda tid: None
    skipped: Callable[[str], None] = lambda tid: None


def _save(store: Store, traj: Trajectory, taxonomy: Taxonomy, user: User,
          prelabel: LlmOpinion | None, hide_prelabel: bool, hooks: Hooks,
          chosen: str, *, accept: bool = False) -> None:
    """Store the label from the form's current values (read from the session: a callback runs
    before the widgets are drawn again, and the session holds what the person last entered).
    ``accept``: the pre-label is being accepted, which takes its step when it was seen."""
    tid = str(traj.id)
    state = st.session_state
    show_prelabel = prelabel is not None and not hide_prelabel
    if state.get(FORM_ITEM) != tid:  # the form shows another item: nothing of it is this one's
        return
    step: int | None = state.get(STEP)
    cursor = state.get(CURSOR)
    if state.get(MARK_BUTTON) is True and isinstance(cursor, int):
        # F and this key came in one batch (the second key was pressed before the server had
        # begun the first's run), and this callback may run before the mark's own.
        step = cursor
    step_from_prelabel = (step is None and show_prelabel and prelabel is not None
                          and prelabel.first_error_step is not None
                          and 0 <= prelabel.first_error_step < len(traj.steps)
                          and is_agent_step(traj.steps[prelabel.first_error_step])
                          and (bool(state.get(ACCEPT_STEP))
                               or (accept and prelabel.first_error_step in seen_steps())))
    if step_from_prelabel:
        assert prelabel is not None
        step = prelabel.first_error_step
    if step is not None and not (0 <= step < len(traj.steps) and is_agent_step(traj.steps[step])):
        state[f"lf_{tid}_error"] = (f"Step {step} is not one of the agent's steps: only those "
                                    "can be the first faulty step. Choose another.")
        return
    secondary: str | None = state.get(SECONDARY)
    note = str(state.get(NOTE) or "")
    if secondary == chosen:
        state[f"lf_{tid}_error"] = "The secondary category must differ from the primary one."
        return
    try:
        store.labels.add(
            tid, chosen, annotator=user.name, taxonomy_version=taxonomy.version,
            secondary_category=secondary, first_error_step=step,
            note=note.strip() or None,
            # Recorded so the LLM-vs-human override rate can be split by anchoring exposure.
            prelabel_shown=show_prelabel,
            step_from_prelabel=step_from_prelabel,
            seconds_on_item=round(time.monotonic() - started_at(tid), 1),
        )
    except StoreUnavailableError as err:
        state[f"lf_{tid}_error"] = (f"{err}: your last key was not saved. Press it again "
                                    "once the database is back (this page retries).")
        state[UNSAVED] = tid
        return
    except StoreError as err:
        state[f"lf_{tid}_error"] = str(err)
        return
    if state.get(UNSAVED) == tid:
        del state[UNSAVED]
    # The hidden pre-label is read only now, after the commit that lets the store show it.
    revealed = prelabel_for(store, tid, viewer_of(user, hide_prelabel=True))[0] \
        if hide_prelabel else prelabel
    state["annotate_last_saved"] = Saved(tid, chosen, revealed, hide_prelabel)
    hooks.saved(tid)


def render_last_saved(taxonomy: Taxonomy) -> None:
    """Confirm the previous save; reveal the pre-label that was hidden while labelling it."""
    saved = st.session_state.get("annotate_last_saved")
    if not isinstance(saved, Saved):
        return
    text = (f"Saved {escape_markdown(category_label(taxonomy, saved.category))} for "
            f"{saved.trajectory_id[:12]}.")
    if saved.prelabel_was_hidden and saved.prelabel is not None:
        same = "agrees" if saved.prelabel.category == saved.category else "differs"
        text += (f" The hidden LLM pre-label was "
                 f"{escape_markdown(category_label(taxonomy, saved.prelabel.category))} "
                 f"({same}).")
    st.success(text, icon=":material/check:")
