"""Re-run a recorded SQL statement in the read-only sandbox and show the result beside it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from faillab.app.state import rerun_sql, workspace
from faillab.app.widgets.safe import escape_markdown


def rerun_button(key: str, sql: str, label: str = "Re-run SQL") -> None:
    """A button that re-executes ``sql``; the result stays shown for this browser session."""
    state_key = f"rerun_result_{key}"
    ehr = workspace().ehr_path
    if ehr is None:
        st.caption("No EHR database configured for this workspace, so SQL can't be re-run "
                   "(faillab sandbox use FILE).")
        return
    if st.button(label, key=f"rerun_btn_{key}", icon=":material/play_arrow:"):
        st.session_state[state_key] = rerun_sql(ehr, sql)
    outcome = st.session_state.get(state_key)
    if outcome is None:
        return
    if "error" in outcome:
        # Named as the re-run's, so it is never mistaken for the step's recorded error nearby.
        st.error(f"**Re-run error** (against {ehr.name}): "
                 + escape_markdown(str(outcome["error"])), icon=":material/replay:")
        return
    rows = outcome["rows"]
    assert isinstance(rows, list)
    st.caption(f"Re-run against {ehr.name}: {len(rows)} row(s) in "
               f"{float(outcome['elapsed_ms']):.0f} ms"
               + (" (truncated)" if outcome["truncated"] else ""))
    st.dataframe(pd.DataFrame(rows, columns=outcome["columns"]), hide_index=True,
                 height=min(38 + 35 * len(rows), 300), key=f"rerun_df_{key}")
