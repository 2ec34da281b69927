"""Re-run a recorded SQL statement in the read-only sandbox and show the result beside it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from app.state import get_settings, workspace


@st.cache_data(max_entries=256, show_spinner=False)
def _run_cached(db_path: str, sql: str, timeout_s: float, row_cap: int) -> dict[str, object]:
    from trajectories.sql import SandboxError, run_isolated

    try:
        result = run_isolated(Path(db_path), sql, timeout_s=timeout_s, row_cap=row_cap)
    except SandboxError as err:
        return {"error": str(err)}
    return {"columns": result.columns, "rows": result.json_rows(),
            "truncated": result.truncated, "elapsed_ms": result.elapsed_ms}


def rerun_button(key: str, sql: str, label: str = "Re-run SQL") -> None:
    """A button that re-executes ``sql``; the result stays shown for this browser session."""
    state_key = f"rerun_result_{key}"
    ehr = workspace().ehr_path
    if ehr is None:
        st.caption("No EHR database configured for this workspace, so SQL can't be re-run "
                   "(faillab sandbox use FILE).")
        return
    if st.button(label, key=f"rerun_btn_{key}", icon=":material/play_arrow:"):
        settings = get_settings()
        st.session_state[state_key] = _run_cached(str(ehr), sql, settings.sql_timeout_s,
                                                  settings.sql_row_cap)
    outcome = st.session_state.get(state_key)
    if outcome is None:
        return
    if "error" in outcome:
        st.error(str(outcome["error"]))
        return
    rows = outcome["rows"]
    assert isinstance(rows, list)
    st.caption(f"Re-run against {ehr.name}: {len(rows)} row(s) in "
               f"{float(outcome['elapsed_ms']):.0f} ms"  # type: ignore[arg-type]
               + (" (truncated)" if outcome["truncated"] else ""))
    st.dataframe(pd.DataFrame(rows, columns=outcome["columns"]), hide_index=True,  # type: ignore[arg-type]
                 height=min(38 + 35 * len(rows), 300), key=f"rerun_df_{key}")
