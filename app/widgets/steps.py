"""The steps of a trajectory: numbered, highlighted, observations as tables when tabular.

Each step is drawn as one block of escaped HTML (its title, code and recorded observation, a
small table as an HTML table), not as five or six Streamlit elements (container, title, code
block, data grid, captions). At 50,000 trajectories the browser drawing those elements was most
of a deep link's wait (0.8-0.9 s of 1.7-1.9 s on a quiet machine). Only what needs Streamlit
stays an element: the Re-run and "Mark as first faulty step" buttons, and the lazy expanders of
long observations, errors, thinking and system prompts (built only when opened).

Every piece of trajectory data is HTML-escaped before it is placed in the block (hostile
strings occur in real trajectories); Streamlit sanitises ``st.html`` once more on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
import streamlit as st

from faillab.app.widgets.safe import code_html, escape_html, escape_markdown, table_html
from trajectories.model import Step, StepKind
from trajectories.reading import split_cut_note
from trajectories.render import (
    Tabular,
    parse_tabular,
    pretty_arguments,
    preview,
    should_collapse,
)

KIND_LABEL = {StepKind.SQL: "SQL", StepKind.PYTHON: "Python", StepKind.TOOL_CALL: "Tool call",
              StepKind.MESSAGE: "Message", StepKind.THINKING: "Thinking"}
#: Characters of a recorded error shown in the step itself; the full text is on demand.
ERROR_PREVIEW = 400

#: The steps' look, sent once per page run (a style-only block takes no room on the page).
#: Colours are translucent so the light and the dark theme both read well.
STEPS_CSS = """<style>
.faillab-step { border: 1px solid rgba(128, 128, 128, 0.3); border-radius: 0.5rem;
  padding: 0.75rem 1rem; }
.faillab-heading { font-size: 1.5rem; font-weight: 600; margin: 0.5rem 0; padding: 0; }
.faillab-far-steps { display: flex; flex-direction: column; gap: 0.35rem; }
.faillab-far > summary { cursor: pointer; padding: 0.35rem 0.6rem; border-radius: 0.4rem;
  border: 1px solid rgba(128, 128, 128, 0.3); overflow-wrap: anywhere; }
.faillab-far[open] > summary { margin-bottom: 0.4rem; }
.faillab-steps { display: flex; flex-direction: column; gap: 1rem; }
.faillab-steps > .faillab-step { content-visibility: auto; contain-intrinsic-size: auto 12rem; }
.faillab-step.faillab-inbox { border: none; padding: 0; }
.faillab-step-title { font-weight: 600; margin-bottom: 0.4rem; }
.faillab-step-title code { font-size: 0.8em; padding: 0.1em 0.3em; }
.faillab-error-mark { color: #e0383e; }
.faillab-usage { color: rgba(128, 128, 128, 1); font-size: 0.85rem; font-weight: 400; }
.faillab-code { background: rgba(128, 128, 128, 0.1); border-radius: 0.4rem;
  padding: 0.6rem 0.8rem; margin: 0 0 0.5rem 0; white-space: pre-wrap;
  overflow-wrap: anywhere; font-family: "Source Code Pro", monospace; font-size: 0.82rem; }
.faillab-note { color: rgba(128, 128, 128, 1); font-size: 0.85rem; margin: 0.2rem 0; }
.faillab-recorded-error { background: rgba(255, 43, 43, 0.09); border-radius: 0.4rem;
  padding: 0.6rem 0.8rem; overflow-wrap: anywhere; }
.faillab-warning { background: rgba(255, 189, 69, 0.15); border-radius: 0.4rem;
  padding: 0.5rem 0.8rem; margin-bottom: 0.5rem; }
.faillab-table-wrap { overflow: auto; }
.faillab-table { border-collapse: collapse; font-size: 0.85rem; }
.faillab-table th, .faillab-table td { border: 1px solid rgba(128, 128, 128, 0.3);
  padding: 0.15rem 0.6rem; text-align: left; vertical-align: top; }
.faillab-table th { background: rgba(128, 128, 128, 0.1); font-weight: 600; }
.faillab-null { color: rgba(128, 128, 128, 1); font-style: italic; }
.faillab-message-role { color: rgba(128, 128, 128, 1); font-size: 0.85rem; }
.faillab-message-text { white-space: pre-wrap; overflow-wrap: anywhere; }
.faillab-info { background: rgba(28, 131, 225, 0.1); border-radius: 0.4rem;
  padding: 0.5rem 0.8rem; margin-bottom: 0.5rem; }
.faillab-verdicts { display: flex; gap: 2rem; margin-bottom: 0.6rem; }
.faillab-verdict-label { font-size: 0.85rem; }
.faillab-verdict-value { font-size: 1.6rem; line-height: 1.3; }
.faillab-pair { display: grid; grid-template-columns: 1fr 1fr; gap: 0.8rem; }
.faillab-pair > div { min-width: 0; }
</style>"""


def steps_css() -> None:
    st.html(STEPS_CSS)


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


def observation_html(text: str) -> str:
    """A short recorded observation: a table when it is one (with the cut note), else text."""
    table, note = table_and_note(text)
    if table is None:
        return code_html(text)
    out = table_html(table.columns, table.rows)
    if note:
        out += f'<p class="faillab-note">{escape_html(note)}</p>'
    return out


def _observation_part(step: Step) -> tuple[str, str | None]:
    """The observation's HTML and, for a long one, what is left to an on-demand expander
    (``"error"``: the full error text; ``"observation"``: the whole observation)."""
    text = step.observation
    if text is None:
        return '<p class="faillab-note">no observation recorded</p>', None
    if step.error:
        # Named as recorded, so it is never mistaken for the error of a re-run shown nearby.
        shown = (f'<div class="faillab-recorded-error" role="alert"><b>Recorded error:</b> '
                 f"{escape_html(preview(text, ERROR_PREVIEW))}</div>")
        return shown, ("error" if len(text) > ERROR_PREVIEW else None)
    if should_collapse(text):
        return "", "observation"
    return observation_html(text), None


def usage_text(step: Step) -> str:
    """The step's duration and token counts as the log recorded them ("" when it has none):
    ``2.3 s · 1,722 tokens (prompt 1,357, completion 365)``. Names of token counts are the
    producer's (escape before placing in HTML)."""
    parts = []
    if step.duration_ms is not None:
        ms = step.duration_ms
        parts.append(f"{ms:,.0f} ms" if round(ms) < 1000 else f"{ms / 1000:,.1f} s")
    tokens = step.tokens or {}
    if tokens:
        total = next((tokens[k] for k in ("total", "total_tokens") if k in tokens), None)
        named = [f"{k.removesuffix('_tokens')} {v:,}" for k, v in tokens.items()
                 if k not in ("total", "total_tokens")]
        if total is None:
            total = sum(tokens.values())
        parts.append(f"{total:,} tokens" + (f" ({', '.join(named)})" if named else ""))
    return " · ".join(parts)


def _usage_html(step: Step) -> str:
    usage = usage_text(step)
    return f' <span class="faillab-usage">· {escape_html(usage)}</span>' if usage else ""


def step_title(index: int, step: Step) -> str:
    title = f"{index}. {escape_html(KIND_LABEL[step.kind])}"
    if step.name:
        title += f" · {escape_html(step.name)}"
    if step.error:
        title += ' · <span class="faillab-error-mark">error</span>'
    return f'<div class="faillab-step-title">{title}{_usage_html(step)}</div>'


def action_html(index: int, step: Step) -> tuple[str, str | None]:
    """An action step (title, its code or arguments, the recorded observation) as one HTML
    block, and what is left to an on-demand expander (see ``_observation_part``)."""
    parts = [step_title(index, step)]
    if step.kind == StepKind.SQL:
        parts.append(code_html(step.code or "", "sql"))
    elif step.kind == StepKind.PYTHON:
        parts.append(code_html(step.code or "", "python"))
        parts.append('<p class="faillab-note">Python steps are shown, never executed.</p>')
    else:
        pretty, valid = pretty_arguments(step.arguments)
        parts.append(code_html(pretty, "json" if valid else None))
        if not valid:
            parts.append('<div class="faillab-warning">The agent emitted arguments that are '
                         "not valid JSON; shown raw.</div>")
    observation, more = _observation_part(step)
    parts.append(observation)
    return f'<div class="faillab-step">{"".join(parts)}</div>', more


def _more(step: Step, more: str | None, expand_all: bool, key: str) -> None:
    """The long part of an observation, built only while its expander is open."""
    text = step.observation or ""
    if more == "error":
        with _lazy_expander(f"Full error ({len(text):,} characters)", expanded=expand_all,
                            key=f"{key}_error") as shown:
            if shown:
                st.code(text, language=None, wrap_lines=True)
    elif more == "observation":
        with _lazy_expander(f"Observation ({len(text):,} characters)", expanded=expand_all,
                            key=f"{key}_obs") as shown:
            if shown:
                _long_observation(text)


def _long_observation(text: str) -> None:
    # Long results keep the interactive grid (sort, search, many rows); they are drawn only
    # when someone opens them.
    table, note = table_and_note(text)
    if table is not None:
        st.dataframe(pd.DataFrame(table.rows, columns=table.columns), hide_index=True,
                     height=min(38 + 35 * len(table.rows), 320))
        if note:
            st.caption(escape_markdown(note))
    else:
        st.code(text, language=None, wrap_lines=True, height=400)


def message_html(index: int, step: Step) -> str:
    role = step.role or "assistant"
    return (f'<div class="faillab-step faillab-message">'
            f'<div class="faillab-message-role">{index}. {escape_html(role)} message'
            f"{_usage_html(step)}</div>"
            f'<div class="faillab-message-text">{escape_html(step.content or "")}</div></div>')


def collapsed_message(step: Step) -> bool:
    """Thinking and system prompts: long and rarely read, shown in an on-demand expander."""
    return step.kind == StepKind.THINKING or (
        step.kind == StepKind.MESSAGE and (step.role or "assistant") == "system")


def plain_step_html(index: int, step: Step) -> str | None:
    """The whole step as one finished HTML block, or None when part of it waits for an
    on-demand expander (a long observation or error, thinking, a system prompt)."""
    if collapsed_message(step):
        return None
    if step.kind == StepKind.MESSAGE:
        return message_html(index, step)
    block, more = action_html(index, step)
    return None if more else block


def _has_buttons(step: Step, rerun: object | None, pick: object | None) -> bool:
    """Whether the step gets a Re-run or "Mark as first faulty step" button (an element)."""
    if step.kind in (StepKind.MESSAGE, StepKind.THINKING):
        return False
    return pick is not None or (rerun is not None and step.kind == StepKind.SQL)


def render_message(index: int, step: Step, expand_all: bool, key_prefix: str = "") -> None:
    if collapsed_message(step):
        what = "Thinking" if step.kind == StepKind.THINKING else "System prompt"
        usage = usage_text(step)
        label = f"{index}. {what} ({len(step.content or ''):,} characters)"
        if usage:
            label += f" · {escape_markdown(usage)}"
        with _lazy_expander(label,
                            expanded=expand_all, key=f"step_{key_prefix}_{index}") as shown:
            if shown:
                st.code(step.content or "", language=None, wrap_lines=True)
        return
    st.html(message_html(index, step))


def render_action(index: int, step: Step, expand_all: bool,
                  rerun: Callable[[int, str], None] | None,
                  pick: Callable[[int], None] | None = None, key_prefix: str = "") -> None:
    block, more = action_html(index, step)
    can_rerun = step.kind == StepKind.SQL and rerun is not None
    if not (can_rerun or pick is not None or more):
        st.html(block)  # the block draws its own border
        return
    # Buttons and expanders are elements of their own; the box keeps them with their step.
    with st.container(border=True, key=f"stepbox_{key_prefix}_{index}"):
        st.html(block.replace('class="faillab-step"', 'class="faillab-step faillab-inbox"', 1))
        _more(step, more, expand_all, key=f"step_{key_prefix}_{index}")
        if can_rerun and rerun is not None:
            rerun(index, step.code or "")
        if pick is not None:
            st.button("Mark as first faulty step", key=f"pick_{key_prefix}_{index}",
                      on_click=pick, args=(index,), type="tertiary",
                      icon=":material/flag:")


def render_steps(steps: list[Step], *, expand_all: bool,
                 rerun: Callable[[int, str], None] | None = None,
                 pick: Callable[[int], None] | None = None, key_prefix: str = "") -> None:
    """``pick``, when given, adds a "Mark as first faulty step" button to every action step
    (the label form uses it so the faulty step is chosen on the trajectory itself).
    ``key_prefix`` names the trajectory, so the open/closed state of its steps is its own.

    Consecutive steps that need no Streamlit element of their own are sent as one HTML block:
    each element costs the browser its own container, sanitiser pass and React subtree."""
    steps_css()
    run: list[str] = []
    for index, step in enumerate(steps):
        plain = None if _has_buttons(step, rerun, pick) else plain_step_html(index, step)
        if plain is not None:
            run.append(plain)
            continue
        if run:
            st.html(f'<div class="faillab-steps">{"".join(run)}</div>')
            run = []
        if step.kind in (StepKind.MESSAGE, StepKind.THINKING):
            render_message(index, step, expand_all, key_prefix)
        else:
            render_action(index, step, expand_all, rerun, pick, key_prefix)
    if run:
        st.html(f'<div class="faillab-steps">{"".join(run)}</div>')
