"""Final answer against ground truth, with a row diff and both outcomes."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from faillab.app.widgets.safe import plain, table_html
from faillab.app.widgets.steps import steps_css
from trajectories.model import Trajectory
from trajectories.scoring import (
    answer_cut,
    answer_diff,
    score_trajectory,
    task_decimals,
    wants_order,
)
from trajectories.workspace import outcome_name

#: How each outcome is shown on the page (``unscored``: no ground truth, no recorded outcome).
OUTCOME_TEXT = {"success": "correct", "failure": "wrong", "unscored": "unscored"}


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, indent=1)


def diff_frame(predicted: Any, truth: Any, decimals: int | None = None) -> pd.DataFrame:
    both, missing, extra = answer_diff(predicted, truth, decimals)
    records = ([{"status": "✓ in both", "row": _fmt(list(r))} for r in both]
               + [{"status": "− missing", "row": _fmt(list(r))} for r in missing]
               + [{"status": "+ extra", "row": _fmt(list(r))} for r in extra])
    return pd.DataFrame(records, columns=["status", "row"])


def diff_table(frame: pd.DataFrame, max_height_px: int) -> None:
    """The row diff as a plain HTML table (escaped), not the interactive grid: a few rows need
    none of the grid's scripts, and the grid was one of the heaviest elements of the page."""
    steps_css()
    table = table_html(list(frame.columns), frame.values.tolist(), max_height_px)
    st.html(f'<div class="faillab-diff">{table}</div>')


def outcome_of(traj: Trajectory) -> str:
    """``success``, ``failure`` or ``unscored`` under the default success source (the recorded
    verdict, else exact match under the task's rules; docs/scoring.md)."""
    recorded = traj.outcome.success if traj.outcome else None
    return outcome_name(recorded if recorded is not None else score_trajectory(traj))


def render_answer_panel(traj: Trajectory) -> None:
    task = traj.task
    ordered = wants_order(task.question, task.answer_format)
    em = score_trajectory(traj)  # None: no ground truth, or a cut answer that cannot decide
    cut = answer_cut(traj)
    recorded = traj.outcome.success if traj.outcome else None
    c1, c2 = st.columns(2)
    c1.metric("Exact match", OUTCOME_TEXT[outcome_name(em)] if em is not None or not cut
              else "unknown",
              help=(f"unknown: {cut}" if cut else "unscored: the task has no ground truth")
              if em is None else None)
    c2.metric("Recorded outcome", "none" if recorded is None else
              OUTCOME_TEXT[outcome_name(recorded)])
    if recorded is not None and em is not None and recorded != em:
        st.warning("The producer's recorded outcome and our exact match disagree.")
    if em is None and recorded is None and not cut:
        st.info("Unscored: the task has no ground truth and the producer recorded no outcome, "
                "so this trajectory is left out of success rates and Pass^k.")
    st.markdown("**Final answer vs ground truth**")
    if cut:
        st.caption(f"Incomplete final answer: {cut}.")
    a, b = st.columns(2)
    with a:
        st.caption("Final answer")
        st.code(_fmt(traj.final_answer), language="json", wrap_lines=True, height=220)
    with b:
        st.caption("Ground truth")
        if task.has_ground_truth:
            st.code(_fmt(task.ground_truth), language="json", wrap_lines=True, height=220)
        else:
            st.caption("None recorded: the producer gave no gold answer for this task.")
    frame = (diff_frame(traj.final_answer, task.ground_truth, task_decimals(task))
             if task.has_ground_truth else pd.DataFrame())
    if not frame.empty:
        diff_table(frame, 300)
    if ordered:
        st.caption("This task asks for an order, so row order counts in the exact match.")
    st.markdown("**Answer format required**")
    plain(task.answer_format or "not stated", caption=True)


def render_answer_compact(traj: Trajectory) -> None:
    """The answer against the ground truth in little height, for the Annotate screen."""
    task = traj.task
    em = score_trajectory(traj)
    cut = answer_cut(traj)
    recorded = traj.outcome.success if traj.outcome else None
    verdict = ("unknown" if cut else "unscored") if em is None else OUTCOME_TEXT[outcome_name(em)]
    rec = "none" if recorded is None else OUTCOME_TEXT[outcome_name(recorded)]
    st.markdown(f"**Answer vs ground truth** · exact match: {verdict} · recorded: {rec}")
    if cut:
        st.caption(f"Incomplete final answer: {cut}.")
    if task.has_ground_truth:
        frame = diff_frame(traj.final_answer, task.ground_truth, task_decimals(task))
        if frame.empty:
            st.caption("Both answers are empty.")
        else:
            diff_table(frame, 150)
        if wants_order(task.question, task.answer_format):
            st.caption("Row order counts for this task.")
    else:
        st.caption("No ground truth recorded; the final answer:")
        st.code(_fmt(traj.final_answer), language="json", wrap_lines=True, height=150)
