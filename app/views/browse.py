"""Browse: filter, sort and page through every trajectory; selecting a row opens it.

Sorting and paging run in DuckDB over the whole filtered set. The filters live in the URL, so
a filtered view can be shared as a link and survives moving to another page and back.

The filters, the pager and the table are one ``st.fragment``: a page, sort or filter change
reruns only them, not the whole app (main.py, the sign-in gate, the sidebar) the browser
would otherwise redraw. Pages are cached on the workspace signature and the filter, and the
next page is computed in the background while this one is read.
"""

from __future__ import annotations

import streamlit as st

from faillab.app.auth import current_user
from faillab.app.state import (
    browse_page_of,
    get_settings,
    get_store_for,
    open_trajectory_link,
    warm_browse_page,
    workspace_facets,
)
from faillab.app.viewer import viewer_of
from faillab.app.widgets.outage import outage_retried
from faillab.app.widgets.stats_data import people_verdicts_of
from labeling.queue import ids_with_final_category
from labeling.store import Viewer
from taxonomy import default_taxonomy
from trajectories.views import SORTABLE, BrowseFilter

PAGE_SIZE = 100
OUTCOMES = ["all", "failed", "succeeded", "unscored"]
#: widget key -> URL parameter, for the list-valued filters.
MULTI = {"browse_runs": "run", "browse_models": "model", "browse_intents": "intent",
         "browse_scopes": "scope", "browse_templates": "template",
         "browse_failure_labels": "label"}
#: widget key -> URL parameter, for the single-valued ones.
SINGLE = {"browse_outcome": "outcome", "browse_text": "q", "browse_sort": "sort"}
FLAGS = {"browse_disagree": "disagree", "browse_desc": "desc"}
SORT_NAMES = {"": "browse order", "question": "question", "id": "id",
              "run": "run", "model": "model", "task_id": "task", "intent": "intent",
              "scope": "scope", "template_id": "template", "n_turns": "turns",
              "n_errors": "errors", "outcome": "outcome", "rollout": "rollout"}


@st.cache_data(ttl=15, max_entries=16, show_spinner=False)
def labelled_ids(url: str, categories: tuple[str, ...], viewer: Viewer) -> list[str]:
    # Final labels change as people annotate; a few seconds of staleness keeps Browse fast.
    # Keyed by the viewer: the store shows each person only what they may see.
    return ids_with_final_category(get_store_for(url), list(categories), viewer=viewer)


def _from_url(options: dict[str, list[str]], categories: list[str]) -> None:
    """Seed the widgets from the URL when it changed; values the workspace lacks are dropped.

    Arriving with no parameters (from the page menu) restores this session's last filters:
    Streamlit forgets a page's widget values once another page has run.
    """
    params: dict[str, list[str]] = {k: st.query_params.get_all(k) for k in st.query_params}
    forgotten = "browse_sort" not in st.session_state  # another page ran since
    if not params and isinstance(saved := st.session_state.get("browse_saved"), dict):
        params = saved
    if st.session_state.get("browse_seeded_from") == params and not forgotten:
        return
    allowed = {"browse_runs": options["run"], "browse_models": options["model"],
               "browse_intents": options["intent"], "browse_scopes": options["scope"],
               "browse_templates": options["template_id"],
               "browse_failure_labels": categories}

    def one(name: str) -> str | None:
        values = params.get(name) or []
        return values[0] if values else None

    for key, param in MULTI.items():
        st.session_state[key] = [v for v in params.get(param, []) if v in allowed[key]]
    outcome = one("outcome")
    st.session_state["browse_outcome"] = outcome if outcome in OUTCOMES else "all"
    st.session_state["browse_text"] = one("q") or ""
    sort = one("sort") or ""
    st.session_state["browse_sort"] = sort if sort in SORT_NAMES else ""
    for key, param in FLAGS.items():
        st.session_state[key] = one(param) == "1"
    page = one("page") or "1"
    st.session_state["browse_page"] = max(1, int(page)) if page.isdigit() else 1
    st.session_state["browse_seeded_from"] = params


def _to_url(page: int) -> None:
    """Write the current filters to the URL (only what differs from the defaults)."""
    wanted: dict[str, str | list[str]] = {}
    for key, param in MULTI.items():
        if values := st.session_state.get(key):
            wanted[param] = list(values)
    for key, param in SINGLE.items():
        value = st.session_state.get(key)
        if value and value != "all":
            wanted[param] = str(value)
    for key, param in FLAGS.items():
        if st.session_state.get(key):
            wanted[param] = "1"
    if page > 1:
        wanted["page"] = str(page)
    params = {k: v if isinstance(v, list) else [v] for k, v in wanted.items()}
    if {k: st.query_params.get_all(k) for k in st.query_params} != params:
        st.query_params.from_dict(wanted)
    st.session_state["browse_seeded_from"] = params
    st.session_state["browse_saved"] = params


def _first_page() -> None:
    # A new filter or sort starts again at page 1.
    st.session_state["browse_page"] = 1


def _filters(viewer: Viewer) -> tuple[BrowseFilter, str, bool]:
    """The filter widgets (seeded from the URL): the filter, the sort column and direction."""
    options = workspace_facets()
    taxonomy = default_taxonomy()
    _from_url(options, list(taxonomy.keys))
    with st.container(border=True):
        c1, c2, c3, c4 = st.columns(4)
        runs = c1.multiselect("Run", options["run"], key="browse_runs", on_change=_first_page)
        models = c2.multiselect("Model", options["model"], key="browse_models",
                                on_change=_first_page)
        intents = c3.multiselect("Intent", options["intent"], key="browse_intents",
                                 on_change=_first_page)
        scopes = c4.multiselect("Scope", options["scope"], key="browse_scopes",
                                on_change=_first_page)
        c5, c6, c7 = st.columns([3, 2, 2])
        # No default once the URL set the value: Streamlit refuses both at once.
        outcome = c5.segmented_control("Outcome", OUTCOMES, key="browse_outcome",
                                       default=None if "browse_outcome" in st.session_state
                                       else "all",
                                       on_change=_first_page,
                                       help="unscored: no ground truth and no recorded outcome")
        templates = c6.multiselect("Template", options["template_id"], key="browse_templates",
                                   on_change=_first_page)
        failure_labels = c7.multiselect("Failure label", list(taxonomy.keys),
                                        key="browse_failure_labels", on_change=_first_page,
                                        format_func=lambda k: taxonomy.category(k).name,
                                        help="Final label: adjudicated, agreed, single person "
                                             "or LLM only. In blind mode annotators filter on "
                                             "their own labels and the pre-labels only.")
        # Widths that show every label whole at 1280 px ("Recorded ≠ exact" was "Re…").
        c8, c9, c10, c11 = st.columns([3, 2, 1.4, 1.8])
        text = c8.text_input("Search question, task id or trajectory id", key="browse_text",
                             on_change=_first_page)
        sort = c9.selectbox("Sort by", list(SORT_NAMES), key="browse_sort",
                            format_func=SORT_NAMES.__getitem__, on_change=_first_page,
                            help="browse order: run, then task, then rollout.")
        descending = c10.toggle("Descending", key="browse_desc", on_change=_first_page)
        disagreement = c11.toggle("Recorded ≠ exact", key="browse_disagree",
                                  on_change=_first_page,
                                  help="Only trajectories whose recorded outcome and exact "
                                       "match disagree.")
    flt = BrowseFilter(
        runs=runs, models=models, intents=intents, scopes=scopes, templates=templates,
        success={"failed": False, "succeeded": True}.get(outcome or "all"),
        unscored_only=outcome == "unscored",
        disagreement_only=disagreement, text=text,
        ids=(labelled_ids(get_settings().annotations_url(), tuple(sorted(failure_labels)),
                          viewer) if failure_labels else None),
        # People's verdicts win over the recorded and judged outcome (as this viewer may
        # see them: the store decides).
        verdicts=people_verdicts_of(viewer),
    )
    return flt, sort if sort in SORTABLE else "", descending


def _pager(page: int, pages: int, total: int, shown: int) -> None:
    first = (page - 1) * PAGE_SIZE + 1 if total else 0
    nav = st.columns([4, 1, 1, 1])
    nav[0].caption(f"{total:,} trajectories match · rows {first:,}–{first + shown - 1:,} · "
                   f"page {page} of {pages}")

    def go(to: int) -> None:
        st.session_state["browse_page"] = min(max(1, to), pages)

    nav[1].button("◀ Previous", key="browse_prev", disabled=page <= 1, on_click=go,
                  args=(page - 1,), width="stretch")
    nav[2].button("Next ▶", key="browse_next", disabled=page >= pages, on_click=go,
                  args=(page + 1,), width="stretch")
    nav[3].number_input("Page", min_value=1, max_value=pages, value=page,
                        key=f"browse_goto_{page}", label_visibility="collapsed",
                        on_change=lambda: go(int(st.session_state[f"browse_goto_{page}"])))


# The question first: it is what people scan; the id last, selectable and copyable as text.
COLUMNS = ["question", "outcome", "run", "model", "intent", "scope", "template_id",
           "rollout", "n_turns", "n_errors", "exact_match", "recorded_success", "task_id", "id"]
COLUMN_CONFIG = {
    "question": st.column_config.TextColumn("question", width="large"),
    "outcome": st.column_config.TextColumn("outcome", help="unscored: no ground truth "
                                           "and no recorded outcome"),
    "template_id": st.column_config.TextColumn("template"),
    "n_turns": st.column_config.NumberColumn("turns"),
    "n_errors": st.column_config.NumberColumn("errors"),
    "exact_match": st.column_config.CheckboxColumn("exact match"),
    "recorded_success": st.column_config.CheckboxColumn("recorded"),
    "task_id": st.column_config.TextColumn("task"),
    "id": st.column_config.TextColumn("id", help="Select a cell and copy it (Ctrl+C)"),
}


@st.fragment
@outage_retried
def browse_view(viewer: Viewer) -> None:
    flt, sort, descending = _filters(viewer)
    st.session_state["browse_filter"] = flt
    page = int(st.session_state.get("browse_page", 1))
    df, total = browse_page_of(flt, sort=sort, descending=descending,
                               offset=(page - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    pages = max(1, -(-total // PAGE_SIZE))
    if page > pages:  # a filter shrank the set under the current page
        page = st.session_state["browse_page"] = pages
        df, total = browse_page_of(flt, sort=sort, descending=descending,
                                   offset=(page - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    _to_url(page)
    _pager(page, pages, total, len(df))
    event = st.dataframe(df[COLUMNS], hide_index=True, on_select="rerun",
                         selection_mode="single-row", key=f"browse_table_{page}",
                         column_config=COLUMN_CONFIG)
    if page < pages:  # the likely next click, computed while this page is read
        warm_browse_page(flt, sort=sort, descending=descending, offset=page * PAGE_SIZE,
                         limit=PAGE_SIZE)
    selected = event.selection.rows if event is not None else []
    if selected:
        open_trajectory_link(str(df.iloc[selected[0]]["id"]))


st.title("Browse")
browse_view(viewer_of(current_user()))
