"""The failure-label form: primary and secondary category, first faulty step, note.

Keyboard-first: number keys 1..9 save the label with that primary category, A accepts the
LLM pre-label, S skips. Every widget key carries the trajectory id, so moving to the next item
never carries a half-filled form over (Streamlit keeps widget state per key).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import streamlit as st

from faillab.app.viewer import viewer_of
from faillab.app.widgets.rubric import category_label
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.queue import PrelabelView
from labeling.store import Store, StoreError, User
from taxonomy import Taxonomy
from trajectories.model import Trajectory
from trajectories.render import preview

Outcome = Literal["saved", "skipped"]
ACCEPT_KEY = "A"
SKIP_KEY = "S"


@dataclass(frozen=True)
class Saved:
    """What the annotator just committed; shown on the next item (with a hidden pre-label)."""

    trajectory_id: str
    category: str
    prelabel: PrelabelView | None
    prelabel_was_hidden: bool


def step_caption(traj: Trajectory, index: int) -> str:
    """"i. kind preview" for the faulty-step picker (plain text: a selectbox shows no markup)."""
    step = traj.steps[index]
    body = step.code or step.arguments or step.content or step.observation or ""
    kind = step.kind.value if hasattr(step.kind, "value") else str(step.kind)
    name = f" {step.name}" if step.name else ""
    flag = " [error]" if step.error else ""
    return f"{index}. {kind}{name}{flag} · {preview(body, 70)}"


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
                                                  viewer.role == "annotator" else ""))
    st.dataframe(pd.DataFrame([{
        "annotator": lab.annotator, "category": category_label(taxonomy, lab.category),
        "secondary": category_label(taxonomy, lab.secondary_category),
        "first faulty step": lab.first_error_step, "note": lab.note or "",
    } for lab in labels]), hide_index=True, key=f"lf_{trajectory_id}_existing")


def _prelabel_box(prelabel: PrelabelView, taxonomy: Taxonomy) -> None:
    conf = f" · confidence {prelabel.confidence:.2f}" if prelabel.confidence is not None else ""
    step = (f" · first faulty step {prelabel.first_error_step}"
            if prelabel.first_error_step is not None else "")
    with st.container(border=True):
        name = escape_markdown(category_label(taxonomy, prelabel.category))
        st.markdown(f"**LLM pre-label:** {name}{conf}{step}")
        if prelabel.rationale:
            plain(prelabel.rationale, caption=True)


def render_label_form(store: Store, traj: Trajectory, taxonomy: Taxonomy, user: User, *,
                      prelabel: PrelabelView | None, hide_prelabel: bool) -> Outcome | None:
    """The form for one item; returns what happened on this run ("saved", "skipped" or None)."""
    tid = str(traj.id)
    t0 = started_at(tid)
    show_prelabel = prelabel is not None and not hide_prelabel
    if prelabel is not None and hide_prelabel:
        st.caption("The LLM pre-label is hidden until you commit, so it cannot anchor you.")
    elif prelabel is None:
        st.caption("No LLM pre-label for this item.")
    if show_prelabel:
        assert prelabel is not None
        _prelabel_box(prelabel, taxonomy)

    steps: list[int | None] = [None, *range(len(traj.steps))]
    # Never prefilled from the pre-label: a step is stored only when the person chose it, or
    # ticked the box below to accept the pre-label's step (recorded as such).
    step = st.selectbox(
        "First faulty step", steps, index=0,
        format_func=lambda i: "not set" if i is None else step_caption(traj, i),
        key=f"lf_{tid}_step",
        help="The earliest step where the trajectory went wrong.",
    )
    accept_step = False
    if show_prelabel and prelabel is not None and prelabel.first_error_step in steps[1:]:
        accept_step = st.checkbox(
            f"Use the pre-label's first faulty step ({prelabel.first_error_step})",
            key=f"lf_{tid}_accept_step", disabled=step is not None,
            help="Only when you checked it: the label records that the step came from the "
                 "pre-label. A step chosen above wins.")
    step_from_prelabel = step is None and accept_step and prelabel is not None
    if step_from_prelabel:
        assert prelabel is not None
        step = prelabel.first_error_step
    keys = list(taxonomy.keys)
    secondary = st.selectbox("Secondary category (optional)", [None, *keys],
                             format_func=lambda k: "none" if k is None
                             else category_label(taxonomy, k),
                             key=f"lf_{tid}_secondary")
    note = st.text_area("Note", key=f"lf_{tid}_note", height=80,
                        placeholder="Why this category? (optional)")

    chosen: str | None = None
    if show_prelabel:
        assert prelabel is not None
        if st.button("Accept pre-label", key=f"lf_{tid}_accept", type="primary",
                     shortcut=ACCEPT_KEY, width="stretch",
                     help="Save the LLM's category with the step, secondary and note above."):
            chosen = prelabel.category
    st.caption("Primary category: press its number to save")
    for number, cat in enumerate(taxonomy.categories[:9], start=1):
        # Streamlit shows the shortcut (the number) on the button itself.
        if st.button(cat.name, key=f"lf_{tid}_cat_{cat.key}",
                     shortcut=str(number), width="stretch", help=cat.definition):
            chosen = cat.key
    if st.button("Skip", key=f"lf_{tid}_skip", shortcut=SKIP_KEY,
                 icon=":material/skip_next:"):
        return "skipped"
    if chosen is None:
        return None
    if secondary == chosen:
        st.error("The secondary category must differ from the primary one.")
        return None
    try:
        store.labels.add(
            tid, chosen, annotator=user.name, taxonomy_version=taxonomy.version,
            secondary_category=secondary, first_error_step=step,
            note=note.strip() or None,
            # Recorded so the LLM-vs-human override rate can be split by anchoring exposure.
            prelabel_shown=show_prelabel,
            step_from_prelabel=step_from_prelabel,
            seconds_on_item=round(time.monotonic() - t0, 1),
        )
    except StoreError as err:
        st.error(str(err))
        return None
    st.session_state["annotate_last_saved"] = Saved(tid, chosen, prelabel,
                                                    prelabel is not None and hide_prelabel)
    return "saved"


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
