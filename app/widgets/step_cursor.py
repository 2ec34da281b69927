"""Annotate's step cursor: read a trajectory step by step by key and mark the first faulty one.

The cursor opens on the diverging step (the evidence's; else a pre-label's that is on screen;
else the first step that errored; else the last action), K and J move it (the step keys of every
page, ``keymap``),
F marks the step under it as the first faulty step, and a category key then saves label and step
together: a label with its step is two keys. Marking the step with the mouse alone (a picker in
the form) left 20 of 20 keyboard labels without one.

The pane draws the cursor step in full between its two neighbours as one-line previews, and the
steps before and after as two folded lines, so the question, the answer and the step fit a
1280x800 screen without the old 290 px scroll box (which showed about one message); only a step
taller than the screen's room scrolls inside itself.
Every step drawn in full is remembered as seen on this item: Accept takes the pre-label's step
only when the annotator has had it on screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from faillab.app.widgets.keymap import KEYS, MARK_STEP, STEP_NEXT, STEP_PREVIOUS, steps_keys
from faillab.app.widgets.label_form import (
    CURSOR,
    MARK_BUTTON,
    SEEN,
    STEP,
    is_agent_step,
    seen_steps,
    set_step,
    start_form,
)
from faillab.app.widgets.safe import escape_html
from faillab.app.widgets.step_outline import render_full_step, step_line_html
from faillab.app.widgets.steps import steps_css
from trajectories.model import Step, StepKind

PREVIOUS_KEY, NEXT_KEY, MARK_KEY = STEP_PREVIOUS, STEP_NEXT, MARK_STEP
#: The keys the cursor answers to, for the page's key list and the help overlay.
CURSOR_KEYS: tuple[tuple[str, str], ...] = (*steps_keys(), (MARK_KEY, KEYS[MARK_KEY][0]))

_CSS = """<style>
/* Tight rows: the question, the cursor step and the answer share one 1280x800 screen. */
.st-key-annotate_steps_pane, .st-key-annotate_steps_pane [data-testid="stVerticalBlock"] {
  gap: 0.4rem; }
.st-key-annotate_cursor_step { border-left: 3px solid rgba(28, 131, 225, 0.85);
  padding-left: 0.5rem; max-height: max(12rem, calc(100vh - 610px)); overflow-y: auto; }
.st-key-annotate_cursor_step .faillab-step { padding: 0.5rem 0.75rem; }
.st-key-annotate_cursor_step .faillab-code { max-height: 8rem; overflow: auto; }
.st-key-annotate_cursor_step .faillab-recorded-error,
.st-key-annotate_cursor_step .faillab-table-wrap { max-height: 7rem; overflow: auto; }
/* One line per folded step; its whole text is one click away (the line opens). */
.st-key-annotate_steps_pane .faillab-far > summary, .faillab-far-group > summary,
.faillab-far-line { white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  padding: 0.2rem 0.6rem; }
.faillab-far-group > summary { cursor: pointer; border-radius: 0.4rem;
  border: 1px dashed rgba(128, 128, 128, 0.45); color: rgba(128, 128, 128, 1); }
.faillab-far-group[open] > summary { margin-bottom: 0.35rem; }
.faillab-far-line { border-radius: 0.4rem; border: 1px solid rgba(128, 128, 128, 0.3); }
</style>"""


def starting_step(steps: Sequence[Step], *, evidence_step: int | None,
                  prelabel_step: int | None) -> int:
    """Where the cursor opens: the step the evidence says diverged; else the pre-label's
    (callers pass it only when the pre-label is on screen: a hidden one must not show through
    the cursor); else the first step that errored; else the last action; else the first."""
    for candidate in (evidence_step, prelabel_step):
        if candidate is not None and 0 <= candidate < len(steps):
            return candidate
    for index, step in enumerate(steps):
        if step.error:
            return index
    actions = [i for i, s in enumerate(steps) if s.kind not in (StepKind.MESSAGE,
                                                                StepKind.THINKING)]
    return actions[-1] if actions else 0


def _move(trajectory_id: str, delta: int, n_steps: int) -> None:
    state = st.session_state
    start_form(trajectory_id)
    current = state.get(CURSOR)
    state[CURSOR] = max(0, min(n_steps - 1, (current if isinstance(current, int) else 0) + delta))


def _mark(trajectory_id: str, agent_steps: frozenset[int]) -> None:
    start_form(trajectory_id)
    cursor = st.session_state.get(CURSOR)
    if isinstance(cursor, int) and cursor in agent_steps:
        set_step(cursor)


def _folded(title: str, steps: Sequence[Step], indices: range) -> str:
    """A run of steps as one folded line; inside, each step is a one-line preview (its body
    on click, when it needs no Streamlit element)."""
    lines = "".join(step_line_html(index, steps[index]) for index in indices)
    return (f'<details class="faillab-far-group"><summary>{escape_html(title)}</summary>'
            f'<div class="faillab-far-steps">{lines}</div></details>')


def render_step_cursor(steps: Sequence[Step], trajectory_id: str, *, start: int,
                       rerun: Callable[[int, str], None] | None = None) -> int | None:
    """The cursor bar and the steps around the cursor; returns the cursor (None: no steps)."""
    if not steps:
        st.caption("This trajectory recorded no steps.")
        return None
    state = st.session_state
    start_form(trajectory_id)
    if not isinstance(state.get(CURSOR), int):
        state[CURSOR] = max(0, min(len(steps) - 1, start))
    cursor = int(state[CURSOR])
    state[SEEN] = tuple(sorted({*seen_steps(), cursor}))
    chosen = state.get(STEP)
    steps_css()
    st.html(_CSS)
    marked = chosen == cursor
    bar = st.columns([4, 3, 3, 4], gap="small", vertical_alignment="center")
    with bar[0], st.container(key="annotate_step_where"):
        # Steps are numbered from 0 everywhere (outline, picker, evidence): say so, since
        # "Step 10 of 23" read as 23 steps where there were 24. Short enough for one line
        # beside the buttons at 1280 px.
        st.markdown(f"Step **{cursor}** of 0–{len(steps) - 1}",
                    help=f"{len(steps)} steps, numbered from 0. {PREVIOUS_KEY}/{NEXT_KEY} move "
                         f"the cursor; {MARK_KEY} marks its step as the first faulty one; a "
                         "category key then saves the label with it.")
    bar[1].button("Back", key="annotate_step_prev", shortcut=PREVIOUS_KEY, width="stretch",
                  disabled=cursor == 0, on_click=_move, args=(trajectory_id, -1, len(steps)),
                  help=f"Previous step ({PREVIOUS_KEY})")
    bar[2].button("Next", key="annotate_step_next", shortcut=NEXT_KEY, width="stretch",
                  disabled=cursor >= len(steps) - 1, on_click=_move,
                  args=(trajectory_id, 1, len(steps)), help=f"Next step ({NEXT_KEY})")
    # The button says whether the step under the cursor is the marked one; on a step the
    # agent did not take (the user's question, a tool's reply) it cannot mark.
    agent_steps = frozenset(i for i, s in enumerate(steps) if is_agent_step(s))
    bar[3].button("Marked" if marked else "Mark", key=MARK_BUTTON,
                  shortcut=MARK_KEY, width="stretch", icon=":material/flag:", on_click=_mark,
                  args=(trajectory_id, agent_steps), type="primary" if marked else "secondary",
                  disabled=cursor not in agent_steps,
                  help="The step under the cursor is the first faulty step (F); a category "
                       "key then saves label and step together." if cursor in agent_steps else
                       "Not one of the agent's steps: only those can be the first faulty step.")
    blocks: list[str] = []
    if cursor > 1:
        blocks.append(_folded(f"Steps 0–{cursor - 2} ({cursor - 1} before)", steps,
                              range(0, cursor - 1)))
    if cursor > 0:
        blocks.append(step_line_html(cursor - 1, steps[cursor - 1]))
    if blocks:
        st.html(f'<div class="faillab-far-steps">{"".join(blocks)}</div>')
    with st.container(key="annotate_cursor_step"):
        render_full_step(cursor, steps[cursor], rerun, trajectory_id)
    after: list[str] = []
    if cursor + 1 < len(steps):
        after.append(step_line_html(cursor + 1, steps[cursor + 1]))
    if cursor + 2 < len(steps):
        after.append(_folded(f"Steps {cursor + 2}–{len(steps) - 1} "
                             f"({len(steps) - cursor - 2} after)", steps,
                             range(cursor + 2, len(steps))))
    if after:
        st.html(f'<div class="faillab-far-steps">{"".join(after)}</div>')
    return cursor
