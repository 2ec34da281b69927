"""Re-run a recorded SQL statement in the read-only sandbox and show the result beside it."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from faillab.app.state import rerun_sql, workspace
from faillab.app.widgets.safe import escape_markdown
from trajectories.model import Step, StepKind

#: Re-run buttons per row in the steps' re-run box.
ROW = 2
NO_EHR = ("No EHR database configured for this workspace, so SQL can't be re-run "
          "(faillab sandbox use FILE).")


def rerun_button(key: str, sql: str, label: str = "Re-run SQL", what: str = "",
                 say_no_ehr: bool = True, result_in: DeltaGenerator | None = None,
                 icon: str | None = ":material/play_arrow:") -> None:
    """A button that re-executes ``sql``; the result stays shown for this browser session.
    ``what`` names what was re-run in the result's heading (e.g. " (step 3)"); without an EHR
    database there is no button, and a line says why unless `say_no_ehr` is off (the screen
    says it elsewhere already). ``result_in``: where the result goes when the button sits in
    a narrow spot (a heading's row)."""
    state_key = f"rerun_result_{key}"
    ehr = workspace().ehr_path
    if ehr is None:
        if say_no_ehr:
            st.caption(NO_EHR)
        return
    if st.button(label, key=f"rerun_btn_{key}", icon=icon):
        st.session_state[state_key] = rerun_sql(ehr, sql)
    with result_in if result_in is not None else nullcontext():
        _show_result(st.session_state.get(state_key), ehr, key, what)


def _show_result(outcome: dict[str, Any] | None, ehr: Path, key: str, what: str) -> None:
    if outcome is None:
        return
    if "error" in outcome:
        # Named as the re-run's, so it is never mistaken for the recorded error of the step.
        st.error(f"**Re-run error{escape_markdown(what)}:** "
                 + escape_markdown(str(outcome["error"])), icon=":material/error:")
        return
    rows = outcome["rows"]
    assert isinstance(rows, list)
    st.caption(f"Re-run against {ehr.name}{escape_markdown(what)}: "
               f"{len(rows)} row(s) in {float(outcome['elapsed_ms']):.0f} ms"
               + (" (truncated)" if outcome["truncated"] else "")
               + (f"; ran at {outcome['ran_at']}, the benchmark's clock"
                  if outcome.get("ran_at") else ""))
    st.dataframe(pd.DataFrame(rows, columns=outcome["columns"]), hide_index=True,
                 height=min(38 + 35 * len(rows), 300), key=f"rerun_df_{key}")


def sql_steps(steps: list[Step]) -> dict[int, str]:
    """The SQL steps that can be re-run: step number -> its SQL."""
    return {i: s.code or "" for i, s in enumerate(steps) if s.kind == StepKind.SQL}


def step_rerun_control(key: str, steps: list[Step]) -> None:
    """One re-run box for a whole steps pane: a collapsed expander whose per-step "Re-run"
    buttons (and their results) are built only while it is open.

    A button in every SQL step (16-19 on a typical failure) was drawn on every deep link
    although one re-run at a time is what anyone asks for: about 0.1 s of a 0.8-0.9 s deep link
    at 50,000 trajectories. A step picker (selectbox) instead cost more browser CPU than the
    buttons (its widget's scripts on every page load). The expander is one element; opening it
    (Enter on its header) reruns only this fragment, and each step's result stays in the
    session, shown again when the box is opened again."""
    choices = sql_steps(steps)
    if not choices:
        return
    ehr = workspace().ehr_path
    if ehr is None:
        st.caption(NO_EHR)
        return
    box = st.expander(f"Re-run a step's SQL ({len(choices)} SQL steps)",
                      key=f"rerun_steps_{key}", on_change="rerun")
    with box:
        if not box.open:
            return
        # Two buttons a row keep the open box short (three cut "Re-run step 14 (error)"); a
        # row's results follow it, full width.
        indexes = list(choices)
        for start in range(0, len(indexes), ROW):
            row = indexes[start:start + ROW]
            for column, index in zip(st.columns(ROW), row, strict=False):
                flag = " (error)" if steps[index].error else ""
                if column.button(f"Re-run step {index}{flag}", key=f"rerun_btn_{key}_{index}",
                                 icon=":material/play_arrow:", width="stretch"):
                    st.session_state[f"rerun_result_{key}_{index}"] = rerun_sql(ehr,
                                                                              choices[index])
            for index in row:
                _show_result(st.session_state.get(f"rerun_result_{key}_{index}"), ehr,
                             f"{key}_{index}", f" (step {index})")
