"""Final answer against ground truth, with a row diff and both outcomes."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from app.widgets.safe import plain
from trajectories.model import Trajectory
from trajectories.scoring import answer_diff, exact_match, wants_order


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, indent=1)


def diff_frame(predicted: Any, truth: Any) -> pd.DataFrame:
    both, missing, extra = answer_diff(predicted, truth)
    records = ([{"status": "✓ in both", "row": _fmt(list(r))} for r in both]
               + [{"status": "− missing", "row": _fmt(list(r))} for r in missing]
               + [{"status": "+ extra", "row": _fmt(list(r))} for r in extra])
    return pd.DataFrame(records, columns=["status", "row"])


def render_answer_panel(traj: Trajectory) -> None:
    task = traj.task
    ordered = wants_order(task.question, task.answer_format)
    em = exact_match(traj.final_answer, task.ground_truth, ordered=ordered)
    recorded = traj.outcome.success if traj.outcome else None
    c1, c2 = st.columns(2)
    c1.metric("Exact match", "correct" if em else "wrong")
    c2.metric("Recorded outcome", "none" if recorded is None else
              ("correct" if recorded else "wrong"))
    if recorded is not None and recorded != em:
        st.warning("The producer's recorded outcome and our exact match disagree.")
    st.markdown("**Final answer vs ground truth**")
    a, b = st.columns(2)
    with a:
        st.caption("Final answer")
        st.code(_fmt(traj.final_answer), language="json", wrap_lines=True, height=220)
    with b:
        st.caption("Ground truth")
        st.code(_fmt(task.ground_truth), language="json", wrap_lines=True, height=220)
    frame = diff_frame(traj.final_answer, task.ground_truth)
    if not frame.empty:
        st.dataframe(frame, hide_index=True, key=f"diff_{traj.id}",
                     height=min(38 + 35 * len(frame), 300))
    if ordered:
        st.caption("This task asks for an order, so row order counts in the exact match.")
    st.markdown("**Answer format required**")
    plain(task.answer_format or "not stated", caption=True)
