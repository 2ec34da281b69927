"""The Statistics page's cached data: the label frames, the filter options and the tables.

Apart from the page so the server can compute what a first visit shows (every run, intent and
scope, human-confirmed labels, as someone not signed in sees them) in the background at its
first page run: the tables over 50,000 trajectories took 0.9-1.8 s the first time, on top of
the page's own run, for whoever opened Statistics first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import make_url

from analysis.sources import (
    LABEL_POLICIES,
    Inputs,
    TableOptions,
    apply_verdicts,
    compute_all,
    filter_frame,
    human_verdicts,
    labeller_pairs,
)
from analysis.sources import counted_labels as policy_labels
from analysis.success import INTENTS, NO_SCOPE, OTHER_INTENT, SCOPES, ordered_values
from faillab.app.state import data_key, get_settings, get_store_for, trajectory_frame
from faillab.app.viewer import viewer_of
from faillab.app.widgets.stats_options import LABEL_SCOPES
from labeling.store import Viewer
from trajectories.workspace import Workspace

#: How long label frames stay cached: labelling goes on while people look at this page, so
#: they must refresh soon, but not on every widget click.
LABELS_TTL_S = 30


@st.cache_data(ttl=LABELS_TTL_S, show_spinner=False, max_entries=4)
def labels_for(url: str, viewer: Viewer) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Final labels and pre-label/human pairs as ``viewer`` may see them (the store decides:
    a blind annotator sees their own labels and the pre-labels)."""
    store = get_store_for(url)
    return store.adjudications.final_labels(viewer=viewer), labeller_pairs(store, viewer=viewer)


@st.cache_data(show_spinner=False, max_entries=8)
def _verdicts_cached(url: str, viewer: Viewer, revision: tuple[int, int]
                     ) -> dict[str, bool | None]:
    return human_verdicts(get_store_for(url), viewer)


def verdicts_for(url: str, viewer: Viewer) -> dict[str, bool | None]:
    """People's verdicts as ``viewer`` may see them (the store decides; blind: their own),
    kept until the store's change log moves (every verdict writes a row): a lead's verdict
    reaches every page on its next run, never after a cache's lifetime."""
    if missing_sqlite_store(url):
        return {}
    return _verdicts_cached(url, viewer, get_store_for(url).history.revision())


def people_verdicts_of(viewer: Viewer) -> dict[str, bool | None]:
    """The people's verdicts every page resolves outcomes with (``trajectories.outcome``), as
    ``viewer`` may see them. A store that cannot be read leaves the outcomes as recorded and
    judged: the trajectories stay visible through an outage."""
    try:
        return verdicts_for(get_settings().annotations_url(), viewer)
    except Exception:  # driver errors vary by backend; the page still shows its data
        return {}


def verdicts_token(verdicts: dict[str, bool | None]) -> int:
    """Content hash of the verdicts, for the tables' cache key."""
    return hash(tuple(sorted(verdicts.items(), key=lambda item: item[0]))) if verdicts else 0


def policy_for(label_scope: str) -> str:
    """The registry's label policy the page's label choice names (`faillab stats --labels`
    takes the same two)."""
    return LABEL_POLICIES[0] if label_scope == LABEL_SCOPES[0] else LABEL_POLICIES[1]


def counted_labels(labels: pd.DataFrame | None, label_scope: str) -> pd.DataFrame | None:
    """The labels the label tables count under the page's choice (for its counts line; the
    tables themselves get every label and apply the policy in the registry)."""
    return policy_labels(labels, policy_for(label_scope))


def _token(df: pd.DataFrame | None) -> int:
    """Content hash of a small frame, to key the table cache without hashing the big frame."""
    if df is None or df.empty:
        return 0
    return int(pd.util.hash_pandas_object(df.astype(str), index=False).sum())


def labels_token(counted: pd.DataFrame | None, pairs: pd.DataFrame | None) -> int:
    return _token(counted) ^ (_token(pairs) * 31)


# No spinners of their own (the page shows one): the warm-up thread fills these caches too.
@st.cache_data(show_spinner=False, max_entries=16)
def tables_for(
    signature: tuple[Any, ...],
    runs: tuple[str, ...],
    intents: tuple[str, ...] | None,
    scopes: tuple[str, ...] | None,
    labels_token: int,
    _frame: pd.DataFrame,
    _labels: pd.DataFrame | None,
    _pairs: pd.DataFrame | None,
    options: TableOptions,
) -> dict[str, pd.DataFrame]:
    """Every table of the registry over the selection: ``_labels`` are all final labels, and
    ``options`` carries the label policy, Pass^k layout and SR(T) definition, exactly as
    `faillab stats` passes them."""
    sub = filter_frame(_frame[_frame["run"].isin(runs)], intents, scopes)
    inputs = Inputs(sub, _labels, _pairs)
    return compute_all(inputs, list(runs), options=options)


@st.cache_data(show_spinner=False, max_entries=8)
def filter_options(
    signature: tuple[Any, ...], _frame: pd.DataFrame
) -> tuple[list[str], list[str], list[str]]:
    """Runs (in order of appearance), intents and scopes present, in their canonical order.

    Cached on the workspace: over 50,000 rows, walking the columns value by value in Python
    was most of the page's script run."""
    runs = [str(r) for r in _frame["run"].astype(str).unique()]
    intents = _frame["intent"].astype("object").fillna(OTHER_INTENT).astype(str).unique()
    scopes = _frame["scope"].astype("object").fillna(NO_SCOPE).astype(str).unique()
    present_intents, present_scopes = {str(i) for i in intents}, {str(s) for s in scopes}
    return (
        runs,
        [i for i in ordered_values(pd.Series(intents), INTENTS) if i in present_intents],
        [s for s in ordered_values(pd.Series(scopes), SCOPES) if s in present_scopes],
    )


def statistics_frame(source: str, verdicts: dict[str, bool | None],
                     ws: Workspace | None = None) -> tuple[pd.DataFrame, tuple[Any, ...]]:
    """The statistics frame with people's verdicts applied (source ``verdict``), and the
    signature its tables are cached under: the page and the warm-up key them alike."""
    frame = apply_verdicts(trajectory_frame(source, ws), verdicts, source)
    token = verdicts_token(verdicts) if source == "verdict" else 0
    return frame, (*data_key(ws), source, token)


def warm_first_visit(ws: Workspace, annotations_url: str, source: str) -> None:
    """Compute what a first visit shows (no filter changed, nobody signed in), to the caches
    the page reads. Runs in a background thread; draws nothing."""
    verdicts = {} if missing_sqlite_store(annotations_url) \
        else verdicts_for(annotations_url, viewer_of(None))
    frame, signature = statistics_frame(source, verdicts, ws)
    runs, _, _ = filter_options(signature, frame)
    labels: pd.DataFrame | None = None
    pairs: pd.DataFrame | None = None
    # A warm-up only reads: it never creates a workspace's annotation store (opening a SQLite
    # store makes its file). No store yet means no labels; the tables' cache key is the same
    # as for an empty store's frames (`labels_token` is 0 for both).
    if not missing_sqlite_store(annotations_url):
        labels, pairs = labels_for(annotations_url, viewer_of(None))
    tables_for(signature, tuple(runs), None, None, labels_token(labels, pairs), frame, labels,
               pairs, TableOptions(tuple(runs), policy_for(LABEL_SCOPES[0])))


def missing_sqlite_store(url: str) -> bool:
    """True for a SQLite store whose file does not exist yet (opening it would create it)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return database in ("", ":memory:") or not Path(database).exists()
