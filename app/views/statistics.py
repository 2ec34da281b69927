"""Statistics: the papers' tables and charts, filtered by run, intent and scope.

Open to everyone (no sign-in): it only reads trajectories and the final labels.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pandas as pd
import streamlit as st

from analysis.exports_paper import ExportContext, export_context, paper_figure
from analysis.quick_charts import html_table, quick_chart
from analysis.sources import (
    DESCRIPTIONS,
    TITLES,
    TableOptions,
    filter_frame,
    run_temperatures,
)
from faillab.app.auth import current_user
from faillab.app.state import get_settings, workspace
from faillab.app.viewer import viewer_of
from faillab.app.widgets.downloads import charts_bundle_download, export_downloads
from faillab.app.widgets.stats_chart import chart_panel, table_panel
from faillab.app.widgets.stats_data import (
    counted_labels,
    filter_options,
    labels_for,
    labels_token,
    policy_for,
    statistics_frame,
    tables_for,
    verdicts_for,
)
from faillab.app.widgets.stats_filters import choose, filters_box, selection_line
from faillab.app.widgets.stats_options import (
    LABEL_CAPTIONS,
    SCOPED_TABLES,
    chart_label_note,
    label_scope_note,
    leave_out_runs,
    no_common_tasks_note,
    passk_view,
    source_note,
    success_source_choice,
    turn_budget_view,
)

st.title("Statistics")
viewer = viewer_of(current_user())
ws = workspace()
if not ws.part_files():
    st.info(
        "This workspace has no trajectories yet. Import some with `faillab import FILE...` "
        "or build the demo with `faillab demo`."
    )
    st.stop()

# The filters open from one button (see stats_filters); the line under it states them.
box = filters_box()
source = success_source_choice(box)
try:
    # People's verdicts (as this viewer may see them) win under the default source.
    verdicts = verdicts_for(get_settings().annotations_url(), viewer)
except Exception as err:  # a store outage must not hide the trajectory statistics
    verdicts = {}
    st.warning(f"People's verdicts could not be loaded: {type(err).__name__}")
with st.spinner("Loading trajectories…"):
    frame, signature = statistics_frame(source, verdicts)

labels: pd.DataFrame | None = None
pairs: pd.DataFrame | None = None
try:
    labels, pairs = labels_for(get_settings().annotations_url(), viewer)
except Exception as err:  # a store outage must not hide the trajectory statistics
    st.warning(f"Labels could not be loaded, label tables are empty: {type(err).__name__}")

all_runs, intent_options, scope_options = filter_options(signature, frame)
selection = choose(box, all_runs, intent_options, scope_options)
if not selection.complete:
    st.info("Pick at least one run, intent and scope (under Filters).")
    st.stop()
runs, intents, scopes, label_scope = (selection.runs, selection.intents, selection.scopes,
                                      selection.label_scope)

# None means "no filter", so the full selection keeps the tables' own NULL handling intact.
intent_sel = None if set(intents) == set(intent_options) else tuple(intents)
scope_sel = None if set(scopes) == set(scope_options) else tuple(scopes)
# The label tables count human-confirmed labels unless LLM-only pre-labels are asked for;
# the provenance table always shows every source, so the share left out stays visible.
# The registry applies the policy (the same one `faillab stats --labels` names).
counted = counted_labels(labels, label_scope)
options = TableOptions(tuple(runs), policy_for(label_scope))
with st.spinner("Computing tables…"):
    tables = tables_for(signature, tuple(runs), intent_sel, scope_sel,
                        labels_token(labels, pairs), frame, labels, pairs, options)

selected = filter_frame(frame[frame["run"].isin(runs)], intent_sel, scope_sel)
st.caption(selection_line(
    selection, runs=all_runs, intents=intent_options, scopes=scope_options,
    trajectories=len(selected),
    labels=0 if counted is None else int(counted["category"].notna().sum()),
    pairs=0 if pairs is None else len(pairs)))
st.caption(source_note(selected, source))


def _context(name: str, note_slice: str = "", by: str = "intent") -> ExportContext:
    """What this tab's exports say besides the table: the same context `faillab stats`
    builds for this selection, so both give the same files."""
    return export_context(name, selected, options, slice_text=note_slice, by=by)


def _all_charts() -> dict[str, Any]:
    return {n: paper_figure(n, t, _context(n)) for n, t in tables.items()}


# --- one tab per table -------------------------------------------------------------------------
names = [n for n in TITLES if n in tables] + [n for n in tables if n not in TITLES]
# The tabs track which one is open, so only its chart and table are built and sent: drawing
# every chart on each visit cost most of the page's first paint.
tabs = st.tabs([TITLES.get(n, n) for n in names], key="stats_tab", on_change="rerun")
for name, tab in zip(names, tabs, strict=True):
    if not tab.open:
        continue
    table = tables[name]
    with tab:
        st.caption(DESCRIPTIONS.get(name, ""))
        if name in LABEL_CAPTIONS:
            st.caption(LABEL_CAPTIONS[name])
        if name in SCOPED_TABLES:
            st.caption(label_scope_note(label_scope) + ".")
        if name == "turn_budget":  # the chart and table follow the chosen SR(T) definition
            table = turn_budget_view(table, selected, list(runs))
        if name == "passk":
            # Pass^k depends on the sampling temperature, so say which one each run used.
            st.markdown("**Sampling temperature per run**")
            temps = run_temperatures(selected)
            # Text, not the data grid: a few rows need none of its scripts.
            st.html(html_table(temps.assign(temperature=[
                "unknown" if pd.isna(t) else f"{float(t):.2f}" for t in temps["temperature"]])))
            if not table.empty:
                c1, c2 = st.columns(2)
                scope_opts = list(dict.fromkeys(table["scope"].astype(str)))
                intent_opts = list(dict.fromkeys(table["intent"].astype(str)))
                scope_pick = c1.selectbox("Chart scope", scope_opts, key="stats_passk_scope")
                intent_pick = c2.selectbox("Chart intent", intent_opts, key="stats_passk_intent")
        by = "intent"
        if name == "robustness" and not table.empty:
            by = str(st.radio("Group pairs by", ["intent", "noise_type"], horizontal=True,
                              key="stats_robustness_by") or "intent")
        chart_table, slice_text = table, ""
        if name == "passk" and not table.empty:
            # The chart builders draw the "all/all" slice; relabel the chosen slice as that so
            # the temperature-annotated legend is kept for every slice.
            chart_table = table[(table["scope"] == scope_pick)
                                & (table["intent"] == intent_pick)].assign(scope="all",
                                                                            intent="all")
            slice_text = f"scope={scope_pick}, intent={intent_pick}"
        note = chart_label_note(name, label_scope)
        chart_context = _context(name, slice_text, by)
        figure = partial(paper_figure, name, chart_table, chart_context)
        chart_panel(quick_chart(name, chart_table, note=slice_text or note, by=by), figure,
                    key=f"stats_chart_{name}")
        if name == "passk":  # a view of the same numbers: per run, or the paper's layout
            table = passk_view(table, selected, list(runs))
        if table.empty:
            note, unsolved = no_common_tasks_note(name, selected, list(runs))
            if name in ("taxonomy", "taxonomy_turns", "provenance"):
                st.info("No final labels for these trajectories yet.")
            elif name == "labeller":
                st.info("No trajectories with both an LLM pre-label and a human label yet.")
            elif note:
                st.info(note)
                if unsolved and len(unsolved) < len(runs):  # one click to the comparison left
                    st.button(f"Leave out the {len(unsolved)} run(s) that solved no task",
                              key=f"stats_leave_out_{name}", on_click=leave_out_runs,
                              args=(unsolved,))
            else:
                st.info("No data for this selection.")
        table_panel(table, key=f"stats_table_{name}")
        # Every export in one menu, mounted only when opened (five buttons were drawn and
        # their scripts fetched on each first visit).
        with st.popover("Export", icon=":material/download:"):
            export_downloads(name, table, chart_table, chart_context, key=f"stats_dl_{name}")
            charts_bundle_download(_all_charts, key="stats_dl_bundle")
