"""The Annotate steps pane: the first steps and the diverging one in full, the rest one line each.

Drawing every step of a long trajectory in full was most of the time between a label key and
the next item (about 0.6 s of 1.2 s at 50K trajectories), while the pane shows two or three
steps at a time. Steps beyond the first few are one-line expanders whose body is built only
when opened (opening one re-runs the panel, which is cheap: the item is cached).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import streamlit as st

from faillab.app.widgets.safe import escape_html, escape_markdown
from faillab.app.widgets.steps import (
    KIND_LABEL,
    plain_step_html,
    render_action,
    render_message,
    steps_css,
)
from trajectories.model import Step, StepKind
from trajectories.render import preview

#: Steps shown in full from the start of the trajectory (the pane shows about this many).
FULL_HEAD = 4


def _one(index: int, step: Step, rerun: Callable[[int, str], None] | None,
         pick: Callable[[int], None] | None, key_prefix: str) -> None:
    if step.kind in (StepKind.MESSAGE, StepKind.THINKING):
        render_message(index, step, False, key_prefix)
    else:
        render_action(index, step, False, rerun, pick, key_prefix)


def _one_line(step: Step) -> str:
    """"kind · name · preview": a far step in one line (raw text; callers escape it)."""
    if step.kind == StepKind.MESSAGE:
        kind = f"{step.role or 'assistant'} message"
    else:
        kind = KIND_LABEL.get(step.kind, str(step.kind))
    body = step.code or step.arguments or step.content or step.observation or ""
    name = f" · {step.name}" if step.name else ""
    return f"{kind}{name} · {preview(body, 70)}"


def outline_label(index: int, step: Step) -> str:
    """"i. kind · name · preview · error" as an expander label (data escaped, never markup)."""
    return (f"{index}. {escape_markdown(_one_line(step))}"
            + (" · :red[error]" if step.error else ""))


def far_step_html(index: int, step: Step) -> str | None:
    """A far step as a native ``<details>`` one-liner (escaped; the browser opens it without a
    script run), or None when its body needs Streamlit (a long observation, thinking or a
    system prompt: built only when its expander opens)."""
    body = plain_step_html(index, step)
    if body is None:
        return None
    mark = ' · <span class="faillab-error-mark">error</span>' if step.error else ""
    return (f'<details class="faillab-far"><summary>{index}. {escape_html(_one_line(step))}'
            f"{mark}</summary>{body}</details>")


def render_step_outline(steps: list[Step], *, full: Collection[int],
                        rerun: Callable[[int, str], None] | None = None,
                        pick: Callable[[int], None] | None = None,
                        key_prefix: str = "") -> None:
    """Steps ``< FULL_HEAD`` and those in ``full`` drawn whole; the others as one-liners.

    A run of far steps is one HTML block of ``<details>`` lines: each used to be an expander
    element (14 on a 20-step item), remounted on every label key because the next item's
    keys are new, and the browser's share of a label key was most of its time."""
    steps_css()
    far: list[str] = []
    for index, step in enumerate(steps):
        if index < FULL_HEAD or index in full:
            _flush(far)
            _one(index, step, rerun, pick, key_prefix)
            continue
        line = far_step_html(index, step)
        if line is not None:
            far.append(line)
            continue
        _flush(far)
        box = st.expander(outline_label(index, step), key=f"outline_{key_prefix}_{index}",
                          on_change="rerun")
        with box:
            if box.open:
                _one(index, step, rerun, pick, key_prefix)
    _flush(far)


def _flush(far: list[str]) -> None:
    if far:
        st.html(f'<div class="faillab-far-steps">{"".join(far)}</div>')
        far.clear()
