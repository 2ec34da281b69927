"""Final answer against ground truth, with a row diff and both outcomes."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import streamlit as st

from faillab.app.widgets.answer_kind import reads_as_prose
from faillab.app.widgets.safe import code_html, escape_html, safe_markdown, table_html
from faillab.app.widgets.steps import steps_css
from trajectories.judge import judge_trajectory
from trajectories.model import Trajectory
from trajectories.render import answer_text, compact_json
from trajectories.scoring import (
    answer_cut,
    answer_diff,
    score_trajectory,
    task_decimals,
    wants_order,
)
from trajectories.workspace import outcome_name

#: A fenced code block of Markdown (```sql ... ```), its fence closed.
_FENCE = re.compile(r"^(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)

#: How each outcome is shown on the page (``unscored``: no ground truth, no recorded outcome).
OUTCOME_TEXT = {"success": "correct", "failure": "wrong", "unscored": "unscored"}


def diff_frame(predicted: Any, truth: Any, decimals: int | None = None) -> pd.DataFrame:
    both, missing, extra = answer_diff(predicted, truth, decimals)
    records = ([{"status": "✓ in both", "row": compact_json(list(r))} for r in both]
               + [{"status": "− missing", "row": compact_json(list(r))} for r in missing]
               + [{"status": "+ extra", "row": compact_json(list(r))} for r in extra])
    return pd.DataFrame(records, columns=["status", "row"])


def diff_html(frame: pd.DataFrame, max_height_px: int) -> str:
    """The row diff as a plain HTML table (escaped), not the interactive grid: a few rows need
    none of the grid's scripts, and the grid was one of the heaviest elements of the page."""
    table = table_html(list(frame.columns), frame.values.tolist(), max_height_px)
    return f'<div class="faillab-diff">{table}</div>'


def diff_table(frame: pd.DataFrame, max_height_px: int) -> None:
    steps_css()
    st.html(diff_html(frame, max_height_px))


def _verdict_html(label: str, value: str, note: str | None = None) -> str:
    extra = f'<div class="faillab-note">{escape_html(note)}</div>' if note else ""
    return (f'<div class="faillab-verdict"><div class="faillab-verdict-label">'
            f'{escape_html(label)}</div><div class="faillab-verdict-value">'
            f"{escape_html(value)}</div>{extra}</div>")


def _json_html(caption: str, value: Any | None, missing: str | None = None) -> str:
    if missing is not None:
        body = f'<p class="faillab-note">{escape_html(missing)}</p>'
    elif isinstance(value, str) and value.strip()[:1] not in ("[", "{"):
        # An answer in prose is read as the text it is, line breaks and all, not as JSON.
        body = code_html(value, "text", max_height_px=220)
    else:
        body = code_html(answer_text(value), "json", max_height_px=220)
    return f'<div><p class="faillab-note">{escape_html(caption)}</p>{body}</div>'


def outcome_note(traj: Trajectory) -> str | None:
    """The note a person wrote beside the recorded verdict in the imported file (a results
    table's "Incorrect Note", kept as ``outcome.note``): why the producer called it wrong."""
    if traj.outcome is None:
        return None
    note = (traj.outcome.model_extra or {}).get("note")
    return str(note).strip() or None if note is not None else None


def _note_html(traj: Trajectory) -> str:
    note = outcome_note(traj)
    return ('<div class="faillab-info" role="note"><strong>Note with the recorded outcome:'
            f'</strong> {escape_html(note)}</div>') if note else ""


def _side_html(caption: str, value: Any | None, missing: str | None = None) -> str | None:
    """One side of the answer pair as escaped HTML; None when it reads as prose (drawn as safe
    Markdown by ``render_answer_panel``, not in a narrow monospace box)."""
    return None if missing is None and reads_as_prose(value) else _json_html(caption, value,
                                                                              missing)


_NO_GOLD = "None recorded: the producer gave no gold answer for this task."


def answer_panel_parts(traj: Trajectory) -> tuple[str, list[tuple[str, Any, str | None]], str]:
    """The answer panel as (the HTML above the answer pair, the pair's two sides as (caption,
    value, HTML or None for prose), the HTML below it). Every piece of data is escaped."""
    task = traj.task
    em = score_trajectory(traj)  # None: no ground truth, or a cut answer that cannot decide
    judged = judge_trajectory(traj)
    cut = answer_cut(traj)
    recorded = traj.outcome.success if traj.outcome else None
    match = OUTCOME_TEXT[outcome_name(em)] if em is not None or not cut else "unknown"
    why = None if em is not None else (
        f"unknown: {cut}" if cut else "unscored: the task has no ground truth")
    source = traj.outcome.source if traj.outcome and traj.outcome.source else None
    parts = ['<div class="faillab-verdicts">',
             _verdict_html("Judge", str(judged.verdict), f"by {judged.method}"),
             _verdict_html("Exact match", match, why),
             _verdict_html("Recorded outcome", "none" if recorded is None
                           else OUTCOME_TEXT[outcome_name(recorded)],
                           f"by {source}" if recorded is not None and source else None),
             "</div>", _note_html(traj),
             f'<p class="faillab-note">Judge\'s evidence: {escape_html(judged.evidence)}</p>']
    if recorded is not None and judged.success is not None and recorded != judged.success:
        parts.append('<div class="faillab-warning" role="alert">The producer\'s recorded '
                     "outcome and the judge disagree.</div>")
    if em is None and recorded is None and not cut and not task.has_ground_truth:
        parts.append('<div class="faillab-info" role="status">Unscored: the task has no ground '
                     "truth and the producer recorded no outcome, so this trajectory is left out "
                     "of success rates and Pass^k.</div>")
    parts.append('<div class="faillab-step-title">Final answer vs ground truth</div>')
    if cut:
        parts.append(f'<p class="faillab-note">Incomplete final answer: {escape_html(cut)}.</p>')
    gold = task.ground_truth if task.has_ground_truth else None
    pair = [("Final answer", traj.final_answer, _side_html("Final answer", traj.final_answer)),
            ("Ground truth", gold, _side_html("Ground truth", gold) if task.has_ground_truth
             else _side_html("Ground truth", None, _NO_GOLD))]
    tail: list[str] = []
    if reads_as_prose(traj.final_answer):
        # A row diff of prose against the gold values is all noise (the whole text one row).
        tail.append('<p class="faillab-note">A prose answer: no row diff; the judge\'s '
                    "evidence above says how it reads against the ground truth.</p>")
    elif task.has_ground_truth:
        frame = diff_frame(traj.final_answer, task.ground_truth, task_decimals(task))
        if not frame.empty:
            tail.append(diff_html(frame, 300))
    if wants_order(task.question, task.answer_format):
        tail.append('<p class="faillab-note">This task asks for an order, so row order counts '
                    "in the exact match.</p>")
    tail.append('<div class="faillab-step-title">Answer format required</div>'
                f'<p class="faillab-note">{escape_html(task.answer_format or "not stated")}</p>')
    return "".join(parts), pair, "".join(tail)


def answer_panel_html(traj: Trajectory) -> str:
    """The answer panel (both verdicts, the final answer and the ground truth, their row diff,
    the format asked for) as one block of escaped HTML, prose included (as escaped text): what
    ``render_answer_panel`` draws in one element when neither answer is prose.

    It was about a dozen Streamlit elements (two metrics, two highlighted JSON code blocks with
    copy buttons, captions): drawing them cost about 0.1 s of every deep link in Chromium at
    50,000 trajectories, for text that needs no script."""
    head, pair, tail = answer_panel_parts(traj)
    sides = "".join(html if html is not None else _json_html(caption, value)
                    for caption, value, html in pair)
    return (f'<div class="faillab-answer">{head}<div class="faillab-pair">{sides}</div>'
            f"{tail}</div>")


def _prose(caption: str, text: str, *, key: str, height: int) -> None:
    """Prose as Markdown with its structure kept (lists, bold, tables) and every link, image,
    HTML tag and Streamlit directive escaped (``safe_markdown``; no ``unsafe_allow_html``)."""
    st.html(f'<p class="faillab-note">{escape_html(caption)}</p>')
    with st.container(height=height if len(text) > 240 else "content", key=key):
        for part, language in prose_parts(text):
            if language is None:
                st.markdown(safe_markdown(part))
            else:
                st.html(code_html(part, language or None))


def prose_parts(text: str) -> list[tuple[str, str | None]]:
    """Prose cut at its fenced code blocks: ``(markdown, None)`` and ``(code, language)``.

    A fenced block in ``st.markdown`` loads Streamlit's syntax highlighter (1.5 MB of script)
    on the first screen of a trajectory whose answer quotes its SQL, about 0.6 s of a fresh
    browser's deep link on a loaded 2-core machine; drawn as ``code_html`` it needs none, and
    its SQL keeps its characters (Markdown escapes are literal inside a fence)."""
    parts: list[tuple[str, str | None]] = []
    at = 0
    for fence in _FENCE.finditer(text):
        if text[at:fence.start()].strip():
            parts.append((text[at:fence.start()], None))
        parts.append((fence.group(3).rstrip("\n"), fence.group(2)))
        at = fence.end()
    if text[at:].strip() or not parts:
        parts.append((text[at:], None))
    return parts


def render_answer_panel(traj: Trajectory) -> None:
    steps_css()
    head, pair, tail = answer_panel_parts(traj)
    if all(html is not None for _, _, html in pair):
        # No prose: one element, as fast as before.
        st.html(answer_panel_html(traj))
        return
    st.html(f'<div class="faillab-answer">{head}</div>')
    # One under the other, each the column's full width: prose side by side with the gold
    # was a box a few words wide in the answer column.
    for caption, value, html in pair:
        if html is None:
            _prose(caption, str(value), key=f"answer_prose_{caption.split()[0].lower()}",
                   height=260)
        else:
            st.html(html)
    st.html(f'<div class="faillab-answer">{tail}</div>')


def render_answer_compact(traj: Trajectory) -> None:
    """The answer against the ground truth in little height, for the Annotate screen."""
    task = traj.task
    em = score_trajectory(traj)
    cut = answer_cut(traj)
    verdict = ("unknown" if cut else "unscored") if em is None else OUTCOME_TEXT[outcome_name(em)]
    # The recorded outcome and the judge's are on the verdict row beside it: said once.
    # Short enough for one line in half of Annotate's left column.
    st.markdown(f"**Answer vs truth**: {verdict}",
                help="The final answer against the task's ground truth (exact match).")
    if cut:
        st.caption(f"Incomplete final answer: {cut}.")
    if note := _note_html(traj):
        steps_css()
        st.html(note)
    answer = traj.final_answer
    if isinstance(answer, str) and answer.strip()[:1] not in ("[", "{"):
        # Text against the gold values: a row diff of text is all noise. Prose (the model
        # wrote Markdown: lists, bold, tables) reads as such, safely (no link, image or HTML);
        # a short value (a date, a name, an ``a; b; c`` list) keeps its compact line.
        steps_css()
        if reads_as_prose(answer):
            with st.container(height=96 if len(answer) > 240 else "content",
                              key="annotate_prose_answer"):
                st.markdown(safe_markdown(answer))
        else:
            st.html(code_html(answer, "text", max_height_px=96))
        _compact_gold(traj)
        return
    if task.has_ground_truth:
        frame = diff_frame(traj.final_answer, task.ground_truth, task_decimals(task))
        if frame.empty:
            st.caption("Both answers are empty.")
        else:
            diff_table(frame, 120)
        if wants_order(task.question, task.answer_format):
            st.caption("Row order counts for this task.")
    else:
        st.caption("No ground truth recorded; the final answer:")
        steps_css()
        st.html(code_html(answer_text(traj.final_answer), "json", max_height_px=150))


def _compact_gold(traj: Trajectory) -> None:
    """The gold under a text answer: prose as safe Markdown, a value on one line."""
    task = traj.task
    gold = task.ground_truth if task.has_ground_truth else None
    if reads_as_prose(gold):
        st.html('<p class="faillab-note">Gold:</p>')
        with st.container(height=96 if len(str(gold)) > 240 else "content",
                          key="annotate_prose_gold"):
            st.markdown(safe_markdown(str(gold)))
        return
    text = answer_text(gold) if task.has_ground_truth else "none recorded"
    st.html(f'<p class="faillab-note">Gold: {escape_html(text)}</p>')
