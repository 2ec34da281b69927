"""Browse: filter trajectories; selecting a row opens it."""

from __future__ import annotations

import streamlit as st

from faillab.app.auth import current_user
from faillab.app.state import (
    get_settings,
    get_store_for,
    open_trajectory_link,
    workspace,
    workspace_facets,
)
from faillab.app.viewer import viewer_of
from labeling.queue import ids_with_final_category
from labeling.store import Viewer
from taxonomy import default_taxonomy
from trajectories.views import BrowseFilter, browse


@st.cache_data(ttl=15, max_entries=16, show_spinner=False)
def labelled_ids(url: str, categories: tuple[str, ...], viewer: Viewer) -> list[str]:
    # Final labels change as people annotate; a few seconds of staleness keeps Browse fast.
    # Keyed by the viewer: the store shows each person only what they may see.
    return ids_with_final_category(get_store_for(url), list(categories), viewer=viewer)


st.title("Browse")
viewer = viewer_of(current_user())
ws = workspace()
options = workspace_facets()

with st.container(border=True):
    c1, c2, c3, c4 = st.columns(4)
    runs = c1.multiselect("Run", options["run"], key="browse_runs")
    models = c2.multiselect("Model", options["model"], key="browse_models")
    intents = c3.multiselect("Intent", options["intent"], key="browse_intents")
    scopes = c4.multiselect("Scope", options["scope"], key="browse_scopes")
    c5, c6, c7, c8, c9 = st.columns([1, 1, 1, 1, 2])
    outcome = c5.segmented_control("Outcome", ["all", "failed", "succeeded"], default="all",
                                   key="browse_outcome")
    templates = c6.multiselect("Template", options["template_id"], key="browse_templates")
    disagreement = c7.toggle("Recorded ≠ exact match", key="browse_disagree")
    taxonomy = default_taxonomy()
    failure_labels = c8.multiselect("Failure label", list(taxonomy.keys),
                                    key="browse_failure_labels",
                                    format_func=lambda k: taxonomy.category(k).name,
                                    help="Final label: adjudicated, agreed, single person or "
                                         "LLM only. In blind mode annotators filter on their "
                                         "own labels and the pre-labels only.")
    text = c9.text_input("Search question, task id or trajectory id", key="browse_text")

flt = BrowseFilter(
    runs=runs, models=models, intents=intents, scopes=scopes, templates=templates,
    success={"failed": False, "succeeded": True}.get(outcome or "all"),
    disagreement_only=disagreement, text=text,
    ids=(labelled_ids(get_settings().annotations_url(), tuple(sorted(failure_labels)), viewer)
         if failure_labels else None),
)
st.session_state["browse_filter"] = flt
df, total = browse(ws, flt)
st.caption(f"{total:,} trajectories match" + (f"; showing the first {len(df):,}"
                                               if total > len(df) else ""))
event = st.dataframe(
    df,
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    key="browse_table",
    column_config={
        "id": st.column_config.TextColumn("id", width="small"),
        "question": st.column_config.TextColumn("question", width="large"),
        "success": st.column_config.CheckboxColumn("success"),
        "outcome": st.column_config.TextColumn("outcome", help="unscored: no ground truth "
                                               "and no recorded outcome"),
        "exact_match": st.column_config.CheckboxColumn("exact match"),
        "recorded_success": st.column_config.CheckboxColumn("recorded"),
    },
)
selected = event.selection.rows if event is not None else []
if selected:
    open_trajectory_link(str(df.iloc[selected[0]]["id"]))
