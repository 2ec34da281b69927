"""Overview: per run and model, and per intent x scope."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from faillab.app.auth import current_user
from faillab.app.state import workspace
from faillab.app.viewer import viewer_of
from faillab.app.widgets.stats_data import people_verdicts_of
from trajectories.run_labels import with_short_run_names
from trajectories.views import intent_scope_counts, overview_by_run

#: Characters of a run name the table shows (about its 185-pixel column).
RUN_NAME_CHARS = 26

st.title("Overview")
ws = workspace()
# Outcomes as everywhere else: people's verdicts (as this viewer may see them) win.
people = people_verdicts_of(viewer_of(current_user()))
summary = ws.summary(people=people)
if summary["trajectories"] == 0:
    st.info("This workspace has no trajectories yet. Import some with "
            "`faillab import FILE...` or build the demo with `faillab demo`.")
    st.stop()

cols = st.columns(5)
# Short labels, the long ones as help: "Recorded vs exact-match dis…" was cut at 1440 px.
for col, (label, key, explained) in zip(
    cols,
    [("Trajectories", "trajectories", None), ("Tasks", "tasks", None), ("Runs", "runs", None),
     ("Failures", "failed", "Trajectories whose outcome is a failure: a person's verdict "
                            "when there is one, else the recorded outcome, else the judge's."),
     # Browse's filter for the same trajectories has the same name.
     ("Recorded ≠ exact", "outcome_disagreements",
      "Trajectories whose recorded outcome and exact match differ.")],
    strict=True,
):
    col.metric(label, f"{summary[key]:,}", help=explained)

st.subheader("By run and model")
# Every column fits the centred page at 1280 px: real run names (90-110 characters) are shown
# by their start and end, the full names listed below; numbers get fixed narrow columns.
runs, shortened = with_short_run_names(overview_by_run(ws, people), limit=RUN_NAME_CHARS)
st.dataframe(
    runs,
    hide_index=True,
    column_config={
        "run": st.column_config.TextColumn("run", width=185),
        "model": st.column_config.TextColumn("model", width=120),
        "temperature": st.column_config.NumberColumn("temp.", format="%.1f", width=50),
        "trajectories": st.column_config.NumberColumn("traj.", width=56,
                                                      help="Trajectories of the run"),
        "tasks": st.column_config.NumberColumn("tasks", width=50),
        "success_rate": st.column_config.ProgressColumn("success", format="%.2f", width=80,
                                                        min_value=0.0, max_value=1.0,
                                                        help="Success rate"),
        "failures": st.column_config.NumberColumn("failed", width=56),
        "unscored": st.column_config.NumberColumn("unscored", width=70),
        "outcome_disagreements": st.column_config.NumberColumn(
            "rec. ≠ exact", width=84, help="Recorded outcome and exact match differ"),
        "mean_turns": st.column_config.NumberColumn("turns", format="%.1f", width=50,
                                                    help="Mean turns per trajectory"),
    },
    key="overview_runs",
)
if shortened:
    with st.expander(f"Full run names ({len(shortened):,} shortened above)"):
        st.dataframe(pd.DataFrame({"shown as": list(shortened), "run": list(shortened.values())}),
                     hide_index=True, key="overview_run_names")
st.caption("Success is a person's verdict when there is one (a lead's wins), else the producer's "
           "recorded outcome, else the judge's; what none decides is unscored. "
           "Disagreements count trajectories whose recorded outcome and exact match differ.")

st.subheader("By intent and scope")
st.dataframe(
    intent_scope_counts(ws, people),
    hide_index=True,
    column_config={"success_rate": st.column_config.ProgressColumn(
        "success rate", format="%.2f", min_value=0.0, max_value=1.0)},
    key="overview_intents",
)
