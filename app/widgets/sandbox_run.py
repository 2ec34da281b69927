"""Re-run a recorded SQL statement in the read-only sandbox and show the result beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from faillab.app.state import rerun_sql, workspace
from faillab.app.widgets.safe import escape_markdown
from trajectories.model import Step, StepKind
from trajectories.render import preview

NO_EHR = ("No EHR database configured for this workspace, so SQL can't be re-run "
          "(faillab sandbox use FILE).")


def rerun_button(key: str, sql: str, label: str = "Re-run SQL", what: str = "") -> None:
    """A button that re-executes ``sql``; the result stays shown for this browser session.
    ``what`` names what was re-run in the result's heading (e.g. " (step 3)")."""
    state_key = f"rerun_result_{key}"
    ehr = workspace().ehr_path
    if ehr is None:
        st.caption(NO_EHR)
        return
    if st.button(label, key=f"rerun_btn_{key}", icon=":material/play_arrow:"):
        st.session_state[state_key] = rerun_sql(ehr, sql)
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
               + (" (truncated)" if outcome["truncated"] else ""))
    st.dataframe(pd.DataFrame(rows, columns=outcome["columns"]), hide_index=True,
                 height=min(38 + 35 * len(rows), 300), key=f"rerun_df_{key}")


def sql_steps(steps: list[Step]) -> dict[int, str]:
    """The SQL steps that can be re-run: step number -> its SQL."""
    return {i: s.code or "" for i, s in enumerate(steps) if s.kind == StepKind.SQL}


def step_choice(index: int, step: Step) -> str:
    """"3. SQL · recorded error · SELECT ..." for the step picker (plain text, never markup)."""
    flag = " · recorded error" if step.error else ""
    return f"{index}. SQL{flag} · {preview(step.code or '', 60)}"


def step_rerun_control(key: str, steps: list[Step]) -> None:
    """One re-run control for a whole steps pane: pick a SQL step, re-run it, see its result.

    One picker and one button instead of a button in every step: at 50,000 trajectories the
    ~19 per-step buttons were about a sixth of a deep link's wait (the browser drawing them),
    while one re-run at a time is what anyone asks for. Both are reachable with the keyboard
    (Tab), and each step's result stays in the session: picking the step again shows it.
    The picker starts on the first SQL step with a recorded error (the one people check)."""
    choices = sql_steps(steps)
    if not choices:
        return
    if workspace().ehr_path is None:
        st.caption(NO_EHR)
        return
    options = list(choices)
    failing = [i for i in options if steps[i].error]
    pick_col, button_col = st.columns([5, 2], vertical_alignment="bottom")
    with pick_col:
        index = st.selectbox("Re-run the SQL of step", options,
                             index=options.index(failing[0]) if failing else 0,
                             format_func=lambda i: step_choice(i, steps[i]),
                             key=f"rerun_pick_{key}")
    if index is None:
        return
    with button_col:
        clicked = st.button("Re-run SQL", key=f"rerun_btn_{key}_{index}",
                            icon=":material/play_arrow:", width="stretch")
    state_key = f"rerun_result_{key}_{index}"
    ehr = workspace().ehr_path
    assert ehr is not None
    if clicked:
        st.session_state[state_key] = rerun_sql(ehr, choices[index])
    _show_result(st.session_state.get(state_key), ehr, f"{key}_{index}", f" (step {index})")
