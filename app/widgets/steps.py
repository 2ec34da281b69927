"""The steps of a trajectory: numbered, highlighted, observations as tables when tabular."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
import streamlit as st

from faillab.app.widgets.safe import escape_markdown, plain
from trajectories.importers.sql_reply import split_cut_note
from trajectories.model import Step, StepKind
from trajectories.render import (
    Tabular,
    parse_tabular,
    pretty_arguments,
    preview,
    should_collapse,
)

KIND_LABEL = {StepKind.SQL: "SQL", StepKind.PYTHON: "Python", StepKind.TOOL_CALL: "Tool call",
              StepKind.MESSAGE: "Message", StepKind.THINKING: "Thinking"}
ROLE_AVATAR = {"user": "user", "assistant": "assistant"}


@contextmanager
def _lazy_expander(label: str, *, expanded: bool, key: str) -> Iterator[bool]:
    """An expander whose content is built only while it is open (yields whether it is).

    A collapsed step's long observation, thinking or system prompt was built and sent to the
    browser on every run (and every label key on Annotate) although nobody looked at it.
    The expander tracks its state (a rerun when opened), and its key carries `expanded`, so
    "Expand all" gives fresh expanders that start open instead of fighting the stored state.
    """
    box = st.expander(label, expanded=expanded, key=f"{key}_{int(expanded)}",
                      on_change="rerun")
    with box:
        yield bool(box.open)


def _observation(step: Step, expand_all: bool, key: str) -> None:
    text = step.observation
    if text is None:
        st.caption("no observation recorded")
        return
    if step.error:
        # Named as recorded, so it is never mistaken for the error of a re-run shown nearby.
        st.error("**Recorded error:** " + escape_markdown(preview(text, 400)),
                 icon=":material/error:")
        if len(text) > 400:  # the full message only on demand
            with _lazy_expander(f"Full error ({len(text):,} characters)", expanded=expand_all,
                                key=f"{key}_error") as shown:
                if shown:
                    st.code(text, language=None, wrap_lines=True)
        return
    if should_collapse(text):
        with _lazy_expander(f"Observation ({len(text):,} characters)", expanded=expand_all,
                            key=f"{key}_obs") as shown:
            if shown:
                _observation_body(text, scroll=True)
        return
    _observation_body(text, scroll=False)


def table_and_note(text: str) -> tuple[Tabular | None, str]:
    """The observation as a table, and the harness's note on a cut listing, if any.

    The harness cuts long results and appends "Note: There are 73 results not shown (out of
    173 total results)."; the rows before it are still a table (about one SQL observation in
    ten in the real trajectories), shown with the note under it. The note is read by the
    importer's parser (``split_cut_note``), so the page and the answer agree on what is cut."""
    table = parse_tabular(text)
    if table is not None:
        return table, ""
    head, note, total = split_cut_note(text)
    if total is not None and head.strip():
        table = parse_tabular(head)
        if table is not None:
            return table, note
    return None, ""


def _observation_body(text: str, *, scroll: bool) -> None:
    table, note = table_and_note(text)
    if table is not None:
        st.dataframe(pd.DataFrame(table.rows, columns=table.columns), hide_index=True,
                     height=min(38 + 35 * len(table.rows), 320))
        if note:
            st.caption(escape_markdown(note))
    else:
        # Short observations show whole; long ones (already in an expander) scroll.
        st.code(text, language=None, wrap_lines=True, height=400 if scroll else "content")


def render_message(index: int, step: Step, expand_all: bool, key_prefix: str = "") -> None:
    role = step.role or "assistant"
    if step.kind == StepKind.THINKING or role == "system":
        what = "Thinking" if step.kind == StepKind.THINKING else "System prompt"
        with _lazy_expander(f"{index}. {what} ({len(step.content or ''):,} characters)",
                            expanded=expand_all, key=f"step_{key_prefix}_{index}") as shown:
            if shown:
                st.code(step.content or "", language=None, wrap_lines=True)
        return
    with st.chat_message(ROLE_AVATAR.get(role, "assistant")):
        st.caption(f"{index}. {role} message")
        plain(step.content)


def render_action(index: int, step: Step, expand_all: bool,
                  rerun: Callable[[int, str], None] | None,
                  pick: Callable[[int], None] | None = None, key_prefix: str = "") -> None:
    title = f"**{index}. {KIND_LABEL[step.kind]}**"
    if step.name:
        title += f" · {escape_markdown(step.name)}"
    if step.error:
        title += " · :red[error]"
    with st.container(border=True):
        st.markdown(title)
        if step.kind == StepKind.SQL:
            st.code(step.code or "", language="sql", wrap_lines=True)
        elif step.kind == StepKind.PYTHON:
            st.code(step.code or "", language="python", wrap_lines=True)
            st.caption("Python steps are shown, never executed.")
        else:
            pretty, valid = pretty_arguments(step.arguments)
            st.code(pretty, language="json" if valid else None, wrap_lines=True)
            if not valid:
                st.warning("The agent emitted arguments that are not valid JSON; shown raw.")
        if step.kind == StepKind.SQL and rerun is not None:
            rerun(index, step.code or "")
        _observation(step, expand_all, key=f"step_{key_prefix}_{index}")
        if pick is not None:
            st.button("Mark as first faulty step", key=f"pick_{key_prefix}_{index}",
                      on_click=pick, args=(index,), type="tertiary",
                      icon=":material/flag:")


def render_steps(steps: list[Step], *, expand_all: bool,
                 rerun: Callable[[int, str], None] | None = None,
                 pick: Callable[[int], None] | None = None, key_prefix: str = "") -> None:
    """``pick``, when given, adds a "Mark as first faulty step" button to every action step
    (the label form uses it so the faulty step is chosen on the trajectory itself).
    ``key_prefix`` names the trajectory, so the open/closed state of its steps is its own."""
    for index, step in enumerate(steps):
        if step.kind in (StepKind.MESSAGE, StepKind.THINKING):
            render_message(index, step, expand_all, key_prefix)
        else:
            render_action(index, step, expand_all, rerun, pick, key_prefix)
