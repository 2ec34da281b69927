"""Steps in brief: a step as one line, a far step as a native ``<details>`` line, a step in full.

Drawing every step of a long trajectory in full was most of the time between a label key and
the next item (about 0.6 s of 1.2 s at 50K trajectories), while a screen shows two or three
steps at a time. Annotate's step cursor (``step_cursor``) draws one step in full and the others
with these one-liners, whose bodies the browser opens without a script run.
"""

from __future__ import annotations

from collections.abc import Callable

from faillab.app.widgets.safe import escape_html
from faillab.app.widgets.steps import (
    KIND_LABEL,
    plain_step_html,
    render_action,
    render_message,
)
from trajectories.model import Step, StepKind
from trajectories.render import preview


def render_full_step(index: int, step: Step, rerun: Callable[[int, str], None] | None,
                     key_prefix: str, pick: Callable[[int], None] | None = None) -> None:
    """The step with its code, observation and on-demand expanders (long parts)."""
    if step.kind in (StepKind.MESSAGE, StepKind.THINKING):
        render_message(index, step, False, key_prefix)
    else:
        render_action(index, step, False, rerun, pick, key_prefix)


def one_line(step: Step) -> str:
    """"kind · name · preview": a far step in one line (raw text; callers escape it)."""
    if step.kind == StepKind.MESSAGE:
        kind = f"{step.role or 'assistant'} message"
    else:
        kind = KIND_LABEL.get(step.kind, str(step.kind))
    body = step.code or step.arguments or step.content or step.observation or ""
    name = f" · {step.name}" if step.name else ""
    return f"{kind}{name} · {preview(body, 70)}"


def far_step_html(index: int, step: Step) -> str | None:
    """A far step as a native ``<details>`` one-liner (escaped; the browser opens it without a
    script run), or None when its body needs Streamlit (a long observation, thinking or a
    system prompt: shown when the cursor reaches it)."""
    body = plain_step_html(index, step)
    if body is None:
        return None
    mark = ' · <span class="faillab-error-mark">error</span>' if step.error else ""
    return (f'<details class="faillab-far"><summary>{index}. {escape_html(one_line(step))}'
            f"{mark}</summary>{body}</details>")


def step_line_html(index: int, step: Step) -> str:
    """The step as a one-liner: openable when its body is plain HTML, else its line alone
    (thinking, a system prompt or a long observation: read it with the cursor on it)."""
    line = far_step_html(index, step)
    if line is not None:
        return line
    mark = ' · <span class="faillab-error-mark">error</span>' if step.error else ""
    return (f'<div class="faillab-far-line">{index}. {escape_html(one_line(step))}{mark}'
            "</div>")
