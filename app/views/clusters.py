"""Clusters: label look-alike failures together, one decision per cluster.

Core members take the decision; each outlier needs its own tick. Labels go through the store's
normal path as the signed-in person's human labels, noted as a cluster decision.
"""

from __future__ import annotations

import time
from collections import Counter

import pandas as pd
import streamlit as st

from faillab.app.auth import require_user
from faillab.app.state import get_settings, get_store, workspace
from faillab.app.viewer import automatic_opinions_visible
from faillab.app.widgets.clusters_data import cluster_view, parts_signature
from faillab.app.widgets.rubric import category_label
from labeling.store import PermissionDeniedError
from opinions.clusters import cluster_title, label_cluster
from taxonomy import default_taxonomy

st.title("Look-alike failures")
user = require_user()
store = get_store()
ws = workspace()
taxonomy = default_taxonomy()


if not ws.exists():
    st.info("No workspace yet: import trajectories first.")
    st.stop()
view = cluster_view(str(ws.root), get_settings().annotations_url(), parts_signature(ws), None)
groups = [c for c in view.clusters if len(c.members) > 1]
st.caption(f"{len(view.items)} failures in {len(view.clusters)} clusters ({view.embedder}, "
           f"cosine distance {view.distance}); {len(groups)} clusters hold two or more.")
if not groups:
    st.info("No two failures look alike enough to label together.")
    st.stop()


def _title(index: int) -> str:
    c = groups[index]
    return cluster_title(c.cluster_id, c.members, view.items)


choice = st.selectbox("Cluster", range(len(groups)), format_func=_title, key="clusters_pick")
cluster = groups[choice]
shown_key = f"clusters_shown_{cluster.cluster_id}"
st.session_state.setdefault(shown_key, time.monotonic())

# The finder's suggestions are automatic opinions: shown only where the store lets this
# person see the pre-label (blind, with the pre-label hidden until commit: items they labelled).
visible = automatic_opinions_visible(store, cluster.members, user)
hidden = len(cluster.members) - len(visible)
suggestions = Counter(view.items[m].suggested for m in cluster.core
                      if m in visible and view.items[m].suggested)
rows = [
    {
        "id": m,
        "task": view.items[m].task_id,
        "outlier": m in cluster.outliers,
        "suggested": (category_label(taxonomy, view.items[m].suggested) if m in visible
                      else "hidden until you label it"),
        "divergence": view.items[m].divergence,
        "question": view.items[m].question,
    }
    for m in cluster.members
]
# Fixed widths so every column starts on screen at 1280 px; the long texts are cut in their
# cells (the item's page has them whole).
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config={
    "id": st.column_config.TextColumn("id", width=110),
    "task": st.column_config.TextColumn("task", width=96),
    "outlier": st.column_config.CheckboxColumn("outlier", width=58),
    "suggested": st.column_config.TextColumn("suggested", width=150),
    "divergence": st.column_config.TextColumn("divergence", width=220),
    "question": st.column_config.TextColumn("question", width=170),
})
if suggestions:
    top, votes = suggestions.most_common(1)[0]
    st.caption(f"Suggested by the evidence finder (first divergent step), not by a person: "
               f"{category_label(taxonomy, top)} for {votes} of the {len(cluster.core)} core "
               "items" + (f" ({hidden} items' suggestions are hidden until you label them)."
                          if hidden else "."))
elif hidden:
    st.caption("The evidence finder's suggestions are hidden until you label the items "
               "(this workspace hides automatic opinions until you commit).")

with st.form(f"clusters_form_{cluster.cluster_id}"):
    # No category is chosen for the lead: one click labels every core item, so a default
    # (the taxonomy's first category) would label a whole cluster nobody decided on.
    category = st.selectbox("Category for the whole cluster", list(taxonomy.keys), index=None,
                            format_func=lambda k: category_label(taxonomy, k),
                            placeholder="choose a category",
                            key=f"clusters_cat_{cluster.cluster_id}")
    confirmed = [
        m for m in cluster.outliers
        if st.checkbox(f"Also label outlier {m}", key=f"clusters_ok_{cluster.cluster_id}_{m}")
    ]
    submitted = st.form_submit_button(
        f"Label {len(cluster.core)} items (+ ticked outliers)", type="primary"
    )
if submitted and category is None:
    st.error("Choose a category for the cluster first; nothing was labelled.")
elif submitted and category is not None:
    store.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())
    spent = time.monotonic() - st.session_state.pop(shown_key, time.monotonic())
    try:
        done = label_cluster(store, cluster, category, annotator=user.name,
                             taxonomy_version=taxonomy.version, confirmed_outliers=confirmed,
                             seconds_on_cluster=spent)
    except PermissionDeniedError as refused:
        st.error(str(refused), icon=":material/block:")
    else:
        st.success(f"Labelled {len(done)} failures as {category_label(taxonomy, category)}.")
