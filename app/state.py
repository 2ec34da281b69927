"""Process-wide resources and the app's cached loaders, in one place.

Every cached loader is keyed by everything its result depends on, and reads nothing else:

* workspace data by ``(workspace root, Workspace.signature())``: an import, a re-score or a
  change of workspace gives a new key, so no page serves trajectories of another state;
* results read from the EHR database by ``(path, mtime, size)`` of the file (``ehr_key``): after
  ``faillab sandbox build`` rewrites it, the next re-run reads the new file.

Pages call the public functions below; the ``_cached`` functions take their keys as arguments
and open the workspace from the root they were given, never from a global.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

from faillab_core.settings import Settings
from labeling.store import Store, open_store
from trajectories.model import Trajectory
from trajectories.views import keep_browse_warm
from trajectories.workspace import Workspace

if TYPE_CHECKING:
    import pandas as pd

    from trajectories.views import BrowseFilter

#: Identity of an EHR database file: resolved path, modification time (ns) and size.
EhrKey = tuple[str, int, int]
T = TypeVar("T")

# Workspace reads run on these long-lived threads. A Workspace keeps one DuckDB connection per
# thread, and a new connection builds its views and a per-task table over every part (0.15-0.19
# CPU s at 50,000 trajectories, 0.4-0.7 s wall under load). Streamlit runs every script run,
# fragment runs included, in a new thread, so each run that read the workspace paid that
# again; on these threads the connections live as long as the process.
_READERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="faillab-workspace-reader")


def on_reader(work: Callable[[], T]) -> T:
    """``work()`` (a workspace read; no Streamlit call) on a reader thread, and its result.
    Its exceptions are raised here, as if it had run in the caller."""
    return _READERS.submit(work).result()


def get_settings() -> Settings:
    # Not cached: reading a dozen environment variables is cheap, and a cached copy would
    # outlive a change of workspace in the same process (tests, bench scripts).
    return Settings.from_env()


@st.cache_resource
def get_workspace(root: str) -> Workspace:
    # One Workspace per process and root; it keeps a DuckDB connection per thread internally.
    ws = Workspace.from_settings(get_settings(), Path(root))
    # Whatever page opens first (a shared Browse link, a deep link), the Browse table is built
    # in the background from now on, and again after each import, instead of on a first Browse.
    keep_browse_warm(ws)
    return ws


@st.cache_resource
def get_store_for(url: str) -> Store:
    # One engine per process and URL; Store opens a short session per call (thread-safe).
    return open_store(url)


def get_store() -> Store:
    settings = get_settings()
    if not settings.database_url:
        settings.workspace.mkdir(parents=True, exist_ok=True)
    return get_store_for(settings.annotations_url())


def existing_store() -> Store | None:
    """The annotation store when there is one; None for a workspace whose SQLite store was
    never created (browsing must not create it: opening a SQLite store makes its file)."""
    if not get_settings().has_annotation_store():
        return None
    return get_store()


def workspace() -> Workspace:
    ws = get_workspace(str(get_settings().workspace))
    _warm_statistics_once(ws)
    return ws


_STATISTICS_WARMED: set[str] = set()
#: How long the statistics warm-up waits after the server's first page run has started.
STATISTICS_WARM_UP_DELAY_S = 0.5
_STATISTICS_LOCK = threading.Lock()
#: Names of the background threads (``in_background``), which have no run context on purpose.
_CONTEXTLESS: set[str] = set()


class _QuietBackground(logging.Filter):
    """Drops Streamlit's "missing ScriptRunContext" warning for the background threads (each
    cache call there would log one line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return threading.current_thread().name not in _CONTEXTLESS


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
    _QuietBackground())


def _warm_statistics_once(ws: Workspace) -> None:
    """Import the Statistics page's modules and compute what its first visit shows, in the
    background at the server's first page run.

    The first Statistics visit of a server process paid about 1.9 s of imports, 0.25 s reading
    the 50,000 rows and 0.9-1.8 s computing the tables (under load). Started when the server
    serves its first page (whatever page that is), they are done by the time someone opens
    Statistics. Once per workspace root and process; after a later import (a new signature)
    the next Statistics visit computes them itself."""
    root = str(ws.root)
    if root in _STATISTICS_WARMED:
        return
    with _STATISTICS_LOCK:
        if root in _STATISTICS_WARMED:
            return
        _STATISTICS_WARMED.add(root)
    if not ws.part_files():
        return
    # The store and workspace are fixed now: the thread must not read the settings later (a
    # test process changes them between tests).
    url = get_settings().annotations_url()
    in_background(lambda: _warm_statistics(ws, url), "faillab-statistics-warm-up")


def _warm_statistics(ws: Workspace, annotations_url: str) -> None:
    import time

    # After the first page's own run has had the interpreter to itself for a moment.
    time.sleep(STATISTICS_WARM_UP_DELAY_S)
    # The page's modules first (scipy, statsmodels, plotly: about 1.9 s), then the frame and
    # the tables a first visit shows, into the caches the page reads.
    import analysis.charts  # noqa: F401  (plotly, imported by the page)
    from faillab.app.widgets.stats_data import warm_first_visit
    from trajectories.workspace import DEFAULT_SUCCESS_SOURCE

    warm_first_visit(ws, annotations_url, DEFAULT_SUCCESS_SOURCE)
    # Then the Clusters page's view, for a workspace small enough (see clusters_data).
    from faillab.app.widgets.clusters_data import warm_cluster_view

    warm_cluster_view(ws, annotations_url)


def data_key(ws: Workspace | None = None) -> tuple[str, tuple[Any, ...]]:
    """``(root, signature)`` of the current workspace: the key of every workspace-data cache."""
    ws = ws or workspace()
    return str(ws.root), ws.signature()


def ehr_key(path: Path | None) -> EhrKey | None:
    """``(path, mtime_ns, size)`` of an EHR database file; None when there is none."""
    if path is None:
        return None
    resolved = path.expanduser().resolve()
    try:
        st_ = resolved.stat()
    except FileNotFoundError:
        return (str(resolved), 0, 0)
    return (str(resolved), int(st_.st_mtime_ns), int(st_.st_size))


# --- workspace data ----------------------------------------------------------------------------
@st.cache_data(max_entries=512, show_spinner=False)
def _trajectory_cached(root: str, signature: tuple[Any, ...],
                       trajectory_id: str) -> Trajectory | None:
    return on_reader(lambda: get_workspace(root).get(trajectory_id))


def load_trajectory(trajectory_id: str) -> Trajectory | None:
    """One trajectory of the current workspace (None when it has no such id)."""
    root, signature = data_key()
    return _trajectory_cached(root, signature, trajectory_id)


@st.cache_data(max_entries=2048, show_spinner=False)
def _neighbours_cached(root: str, signature: tuple[Any, ...], trajectory_id: str,
                       where: tuple[Any, ...],
                       _flt: BrowseFilter | None) -> tuple[str | None, str | None]:
    # Keyed by the filter's SQL (what the query depends on), not the filter object itself.
    from trajectories.views import failure_neighbours

    return on_reader(lambda: failure_neighbours(get_workspace(root), trajectory_id, _flt))


def failure_neighbours_of(trajectory_id: str,
                          flt: BrowseFilter | None) -> tuple[str | None, str | None]:
    """The previous and next failure around ``trajectory_id`` (in Browse's filter when given).

    Cached: the window query over every failure took 40-150 ms at 50,000 trajectories, on
    every run of the trajectory page (each J/K, each re-run click)."""
    return _neighbours_cached(*data_key(), trajectory_id, _filter_key(flt), flt)


def _filter_key(flt: BrowseFilter | None) -> tuple[Any, ...]:
    """A filter as a cache key: its SQL, parameters and the people's verdicts it applies
    (what a query over it depends on)."""
    from trajectories.views import BrowseFilter

    return (flt or BrowseFilter()).key()


@st.cache_data(max_entries=64, show_spinner=False)
def _browse_page_cached(root: str, signature: tuple[Any, ...],
                        where: tuple[Any, ...], sort: str, descending: bool,
                        offset: int, limit: int,
                        _flt: BrowseFilter) -> tuple[pd.DataFrame, int]:
    from trajectories.views import browse_page

    return on_reader(lambda: browse_page(get_workspace(root), _flt, sort=sort,
                                         descending=descending, offset=offset, limit=limit))


def browse_page_of(flt: BrowseFilter, *, sort: str, descending: bool, offset: int,
                   limit: int) -> tuple[pd.DataFrame, int]:
    """One Browse page and the filtered set's total, cached on the workspace signature, the
    filter, the sort and the page: the count and the sorted page over 50,000 rows took
    0.2-0.3 s, on every return to a page, sort or filter already seen."""
    return _browse_page_cached(*data_key(), _filter_key(flt), sort, descending, offset,
                               limit, flt)


def warm_browse_page(flt: BrowseFilter, *, sort: str, descending: bool, offset: int,
                     limit: int) -> None:
    """Compute a Browse page in the background (the next one, while this one is read)."""
    key = data_key()

    def warm() -> None:
        _browse_page_cached(*key, _filter_key(flt), sort, descending, offset, limit, flt)

    in_background(warm, "faillab-browse-warm-up")


def in_background(work: Callable[[], object], name: str) -> None:
    """Run ``work`` (filling process-wide caches, drawing nothing) in a daemon thread.

    The thread does not carry the page's run context: a thread holding a session's context
    while that session went on made it lose widget clicks (measured with the Statistics
    warm-up: one Browse toggle click in three started no script run). Streamlit's caches work
    without one; their "missing ScriptRunContext" warning is filtered for these threads. A
    failure only means the page computes the result itself."""
    _CONTEXTLESS.add(name)
    threading.Thread(target=_quietly(work), name=name, daemon=True).start()


@st.cache_data(max_entries=8, show_spinner=False)
def _first_failure_cached(root: str, signature: tuple[Any, ...]) -> str | None:
    from trajectories.views import first_failure

    return on_reader(lambda: first_failure(get_workspace(root)))


def first_failure_id() -> str | None:
    """The first failed trajectory in browse order (the trajectory page without an id)."""
    return _first_failure_cached(*data_key())


@st.cache_data(max_entries=8, show_spinner=False)
def _facets_cached(root: str, signature: tuple[Any, ...]) -> dict[str, list[str]]:
    from trajectories.views import facets

    return on_reader(lambda: facets(get_workspace(root)))


def workspace_facets() -> dict[str, list[str]]:
    """Distinct values (run, model, intent, scope, ...) for the filter widgets."""
    return _facets_cached(*data_key())


# No spinner of its own: the warm-up thread fills it too, and a spinner drawn from that thread
# would land in whatever page its run context belongs to. Statistics shows its own.
# One shared frame, not a copy per run: `cache_data` unpickled all 50,000 rows on every
# Statistics run (20-110 ms of its 125-150 ms). Readers only select from it (pandas'
# copy-on-write keeps what they derive apart); nothing writes to it.
@st.cache_resource(show_spinner=False, max_entries=4)
def _frame_cached(root: str, signature: tuple[Any, ...], source: str) -> pd.DataFrame:
    from analysis.sources import load_frame

    return on_reader(lambda: load_frame(get_workspace(root), success_source=source))


def trajectory_frame(source: str, ws: Workspace | None = None) -> pd.DataFrame:
    """The statistics frame of the current workspace (or ``ws``) under a success source."""
    root, signature = data_key(ws)
    return _frame_cached(root, signature, source)


def contextless_here() -> None:
    """Mark the calling server thread as one that reads caches outside any script run (the
    first screen's reads, ``app/first_screen.py``): its "missing ScriptRunContext" warning is
    filtered as the warm-up threads' is."""
    _CONTEXTLESS.add(threading.current_thread().name)


def _quietly(work: Callable[[], object]) -> Callable[[], None]:
    """``work`` for a warm-up thread: a failure only means the page computes it itself."""

    def run() -> None:
        try:
            work()
        except Exception:  # nothing waits on a warm-up; the page redoes the work
            return

    return run


# --- the EHR database --------------------------------------------------------------------------
@st.cache_data(max_entries=256, show_spinner=False)
def _rerun_cached(ehr: EhrKey, sql: str, timeout_s: float, row_cap: int,
                  now: str | None = None) -> dict[str, object]:
    from trajectories.sql import SandboxError, run_isolated

    try:
        result = run_isolated(Path(ehr[0]), sql, timeout_s=timeout_s, row_cap=row_cap, now=now)
    except SandboxError as err:
        return {"error": str(err)}
    return {"columns": result.columns, "rows": result.json_rows(),
            "truncated": result.truncated, "elapsed_ms": result.elapsed_ms,
            "ran_at": result.ran_at}


def rerun_sql(ehr_path: Path, sql: str) -> dict[str, object]:
    """Run ``sql`` read-only against the EHR file, with the settings' time limit and row cap:
    ``{"error": ...}`` or ``{"columns", "rows", "truncated", "elapsed_ms", "ran_at"}`` (the
    benchmark's time a query that reads the clock ran at, else None)."""
    from trajectories.sql import SandboxError, workspace_reference_time

    settings = get_settings()
    key = ehr_key(ehr_path)
    assert key is not None
    try:
        # The workspace's own clock, when it names one (``faillab sandbox use --reference-time``).
        now = workspace_reference_time(workspace().read_settings())
    except SandboxError as err:
        return {"error": str(err)}
    return _rerun_cached(key, sql, settings.sql_timeout_s, settings.sql_row_cap, now)


@st.cache_resource(show_spinner=False, max_entries=4)
def _sandbox_warmer(ehr: EhrKey) -> threading.Thread:
    def warm() -> None:
        from trajectories.sql import run_isolated

        # A failed warm-up costs nothing: the click then starts the worker as before.
        run_isolated(Path(ehr[0]), "SELECT 1", timeout_s=30.0, row_cap=1)

    thread = threading.Thread(target=_quietly(warm), name="sandbox-warm-up", daemon=True)
    thread.start()
    return thread


def warm_sandbox() -> None:
    """Start a SQL sandbox worker in the background, once per process and EHR file.

    A new worker is a fresh interpreter that imports DuckDB and opens the EHR file: on a loaded
    machine that took most of the first re-run's wait. Started when a page that can re-run
    SQL opens, it is ready by the time anyone clicks."""
    path = workspace().ehr_path
    if path is not None and path.is_file():
        key = ehr_key(path)
        assert key is not None
        _sandbox_warmer(key)


def open_trajectory_link(trajectory_id: str) -> None:
    """Go to the trajectory page with a shareable deep link (?id=...)."""
    st.switch_page("views/trajectory.py", query_params={"id": trajectory_id})
