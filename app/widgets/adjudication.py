"""Adjudicate's decision block: one card per opinion (each rater's latest label and the
pre-label), each with a key that takes it into the decision form, and the form right under the
cards. Keys: 1..9 take rater A, B, ...; P the pre-label; O none of them (choose below); the
reason box then has the focus and Enter saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from faillab.app.widgets.keymap import TAKE_NONE, TAKE_PRELABEL
from faillab.app.widgets.rubric import category_label
from faillab.app.widgets.safe import escape_markdown, plain
from taxonomy import Taxonomy

PRELABEL_KEY, OTHER_KEY = TAKE_PRELABEL, TAKE_NONE
#: The reason box, where the focus goes after a take key (Enter there saves).
REASON_BOX = "[class*='st-key-adj_'][class*='_reason'] input"


@dataclass(frozen=True)
class Opinion:
    """One card: a rater's latest label, or the pre-label."""

    title: str
    category: str
    secondary: str | None
    step: int | None
    note: str | None
    detail: str  # "pre-label was shown · 12 s on item", or "confidence 0.90"
    shortcut: str


def field_keys(trajectory_id: str) -> dict[str, str]:
    """The decision form's session keys for this item."""
    return {name: f"adj_{trajectory_id}_{name}" for name in ("category", "secondary", "step",
                                                             "reason", "taken")}


def decision_keys(n_raters: int, with_prelabel: bool) -> list[tuple[str, str]]:
    """The page's keys, for the help list."""
    keys = [(str(i + 1), f"take rater {chr(ord('A') + i)}'s label") for i in range(n_raters)]
    if with_prelabel:
        keys.append((PRELABEL_KEY, "take the pre-label"))
    keys += [(OTHER_KEY, "none of them: choose the category yourself"),
             ("Enter", "in the reason box: save the decision")]
    return keys


def _take(trajectory_id: str, opinion: Opinion | None) -> None:
    keys = field_keys(trajectory_id)
    state = st.session_state
    state[keys["category"]] = opinion.category if opinion else None
    state[keys["secondary"]] = opinion.secondary if opinion else None
    state[keys["step"]] = opinion.step if opinion else None
    state[keys["taken"]] = opinion.title if opinion else "your own choice"


def render_cards(trajectory_id: str, opinions: Sequence[Opinion], taxonomy: Taxonomy,
                 ) -> DeltaGenerator:
    """The cards side by side, each with its take button, then the "none of them" button;
    returns the cell beside that button (for the page's line on what was taken)."""
    cols = st.columns(max(1, len(opinions)), gap="small")
    for index, (col, opinion) in enumerate(zip(cols, opinions, strict=False)):
        with col.container(border=True, key=f"adj_card_{index}", gap="xsmall"):
            st.markdown(f"**{escape_markdown(opinion.title)}** · "
                        f"{escape_markdown(category_label(taxonomy, opinion.category))}")
            step = "not set" if opinion.step is None else str(opinion.step)
            st.caption(f"Secondary: {escape_markdown(category_label(taxonomy, opinion.secondary))}"
                       f" · first faulty step: {step}"
                       + (f" · {escape_markdown(opinion.detail)}" if opinion.detail else ""))
            with st.container(height=72 if opinion.note and len(opinion.note) > 120 else
                              "content", border=False):
                plain(opinion.note or "(no note)", caption=True)
            st.button("Take", key=f"adj_take_{index}", shortcut=opinion.shortcut,
                      width="stretch", on_click=_take, args=(trajectory_id, opinion),
                      help=f"Copy {opinion.title}'s category, secondary and step into the "
                           f"decision ({opinion.shortcut}); then write the reason and press "
                           "Enter.")
    row = st.columns([1, 4], vertical_alignment="center")
    row[0].button("None of them", key="adj_take_other", shortcut=OTHER_KEY, on_click=_take,
                  args=(trajectory_id, None), type="tertiary",
                  help=f"Clear the decision and choose the category yourself ({OTHER_KEY}).")
    return row[1]
