"""Overview: per run and model, and per intent x scope."""

from __future__ import annotations

import streamlit as st

from faillab.app.state import workspace
from trajectories.views import intent_scope_counts, overview_by_run

st.title("Overview")
ws = workspace()
summary = ws.summary()
if summary["trajectories"] == 0:
    st.info("This workspace has no trajectories yet. Import some with "
            "`faillab import FILE...` or build the demo with `faillab demo`.")
    st.stop()

cols = st.columns(5)
# Short labels, the long ones as help: "Recorded vs exact-match dis…" was cut at 1440 px.
for col, (label, key, explained) in zip(
    cols,
    [("Trajectories", "trajectories", None), ("Tasks", "tasks", None), ("Runs", "runs", None),
     ("Failures", "failed", "Trajectories whose outcome is a failure (the recorded outcome "
                            "when there is one, else exact match)."),
     # Browse's filter for the same trajectories has the same name.
     ("Recorded ≠ exact", "outcome_disagreements",
      "Trajectories whose recorded outcome and exact match differ.")],
    strict=True,
):
    col.metric(label, f"{summary[key]:,}", help=explained)

st.subheader("By run and model")
st.dataframe(
    overview_by_run(ws),
    hide_index=True,
    column_config={
        "success_rate": st.column_config.ProgressColumn("success rate", format="%.2f",
                                                        min_value=0.0, max_value=1.0),
        "mean_turns": st.column_config.NumberColumn("mean turns", format="%.1f"),
        "temperature": st.column_config.NumberColumn("temp.", format="%.1f"),
    },
    key="overview_runs",
)
st.caption("Success is the producer's recorded outcome when it has one, else our exact match. "
           "Disagreements count trajectories where the two differ.")

st.subheader("By intent and scope")
st.dataframe(
    intent_scope_counts(ws),
    hide_index=True,
    column_config={"success_rate": st.column_config.ProgressColumn(
        "success rate", format="%.2f", min_value=0.0, max_value=1.0)},
    key="overview_intents",
)
