"""Pre-label: run a labeller over the failures in the background and watch it; see the result.

Runs happen in a separate worker process (the hidden ``faillab prelabel-worker`` command) so
that a long Gemini run survives page reruns and does not block the server; this page only writes
the run record, launches the worker and polls the record.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any

import pandas as pd
import streamlit as st

from faillab.app.auth import require_user
from faillab.app.state import get_settings, get_store, get_store_for, workspace
from faillab.app.viewer import viewer_of
from faillab.app.widgets.routing import render_routing
from labeling.store import LEAD_ROLES, PrelabelRun
from llm import LLMConfigError, backend, is_backend
from opinions.prelabel.consent import needs_consent
from opinions.prelabel.labellers import labeller_identity, load_run_taxonomy
from opinions.prelabel.launch import launch_worker, mark_dead_run, run_log_path
from opinions.prelabel.options import PrelabelOptions, labeller_names, option_spec
from opinions.prelabel.routing import prelabel_confidences
from opinions.prelabel.run_errors import PrelabelServiceError


@st.cache_resource
def _workers() -> dict[int, subprocess.Popen[bytes]]:
    # Worker handles of this server process, by run id: polling them reaps finished children
    # and tells a worker that died (SIGKILL) from one that is still going.
    return {}


st.title("Pre-label")
user = require_user()
settings = get_settings()
ws = workspace()
store = get_store()
# The items a run labels: those that need a person, by the one outcome rule with every
# person's verdict counted (a lead's wins), as the run itself selects them.
failures = [row["id"] for row in ws.list(needing_a_person=True,
                                         people=store.verdicts.effective())]
if not failures:
    st.info("This workspace has no failed trajectories to pre-label. Import some with "
            "`faillab import FILE...` or build the demo with `faillab demo`.")
    st.stop()

# -- choice of labeller -------------------------------------------------------------------------
left, right = st.columns(2)


def _title(name: str) -> str:
    return backend(name).title if is_backend(name) else "Heuristic (offline)"


# Labels, bounds and help come from the one option definition the CLI uses too; the LLM
# backends, their titles and where they send data, from the registry (``llm.backends``).
labeller = left.radio(
    option_spec("labeller").label, labeller_names(), horizontal=True, key="prelabel_labeller",
    format_func=_title,
)
model = ""
vertex = bool(settings.vertex_project)
acknowledged = False
if is_backend(labeller):
    entry = backend(labeller)
    model = right.text_input(option_spec("model").label, value=entry.default_model(settings),
                             key=f"prelabel_{labeller}_model",
                             help=option_spec("model").help).strip()
    if entry.has_vertex:
        vertex = right.checkbox(option_spec("vertex").label, value=vertex,
                                key="prelabel_vertex", help=option_spec("vertex").help)
    try:
        # The address comes from the settings (the worker reads the same environment), so the
        # page shows it rather than offering to change it for one run.
        conn = entry.connect(settings, model=model or None,
                             vertex=vertex if entry.has_vertex else None)
    except LLMConfigError as err:
        st.error(str(err))
        st.stop()
    server = entry.server(conn)
    if server is not None:
        right.caption(f"Server: {server}")
    dest = entry.destination(conn)
    if dest.own_machines:
        st.info(dest.notice, icon="🔒")
    else:
        st.warning(dest.notice, icon="⚠️")
        acknowledged = st.checkbox(option_spec("allow_external").label, key="prelabel_ack")
c1, c2 = st.columns(2)
concurrency = int(c1.number_input(option_spec("concurrency").label,
                                  min_value=option_spec("concurrency").minimum, max_value=64,
                                  value=PrelabelOptions().concurrency, step=1,
                                  key="prelabel_concurrency", disabled=not is_backend(labeller),
                                  help=option_spec("concurrency").help))
limit = int(c2.number_input(f"{option_spec('limit').label} (0 = every failure)", min_value=0,
                            value=0, step=10, key="prelabel_limit",
                            help=option_spec("limit").help))

try:
    options = PrelabelOptions(
        labeller=labeller, model=model or None, concurrency=concurrency, limit=limit or None,
        vertex=vertex if is_backend(labeller) and backend(labeller).has_vertex else None,
        allow_external=acknowledged,
    ).with_defaults(settings)
except PrelabelServiceError as err:
    st.error(str(err))
    st.stop()

# -- start --------------------------------------------------------------------------------------
can_start = user.role in LEAD_ROLES
blocked_by_privacy = needs_consent(options) and not acknowledged
if not can_start:
    st.caption("Only leads and admins start pre-labelling runs; you can watch them here.")
elif blocked_by_privacy:
    st.caption("Confirm the privacy notice to start a run that sends trajectories to this "
               "service.")
if st.button("Start", type="primary", key="prelabel_start",
             disabled=not can_start or blocked_by_privacy):
    if user.role not in LEAD_ROLES:  # the button is disabled; this guards a forged rerun
        st.error("Only leads and admins may start runs.")
        st.stop()
    name, run_model, _ = labeller_identity(options)
    run_id = store.prelabels.start_run(name, run_model, actor=user.name)
    try:
        proc = launch_worker(options, run_id=run_id, workspace_root=ws.root.resolve(),
                             database_url=settings.database_url)
    except OSError as err:
        store.prelabels.update_run(run_id, status="failed")
        st.error(f"Could not start the worker: {err}")
    else:
        _workers()[run_id] = proc
        st.session_state["prelabel_run_id"] = run_id


def _check_alive(run: PrelabelRun) -> PrelabelRun:
    proc = _workers().get(run.id)
    if proc is None:
        return run
    return mark_dead_run(store, run, proc.poll())


def _log_tail(run_id: int, lines: int = 5) -> str:
    path = run_log_path(ws.root.resolve(), run_id)
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _shown_run() -> PrelabelRun | None:
    """The run started from this session, else the newest one."""
    run_id = st.session_state.get("prelabel_run_id")
    run = store.prelabels.get_run(int(run_id)) if run_id is not None else None
    if run is None:
        recent = store.prelabels.latest_runs(1)
        run = recent[0] if recent else None
    return None if run is None else _check_alive(run)


def _live_run() -> None:
    """The shown run, refreshed every second while it runs (`live_run`)."""
    run = _shown_run()
    if run is None:
        st.caption("No pre-labelling run yet.")
        return
    if st.session_state.get(LIVE_STATUS) == "running" and run.status != "running":
        # Finished: one whole run of the page shows the end everywhere (the recent runs and
        # the distribution below) and stops the refresh.
        st.session_state[LIVE_STATUS] = run.status
        st.rerun()
    st.session_state[LIVE_STATUS] = run.status
    st.subheader(f"Run {run.id}: {run.labeller} ({run.model}) — {run.status}")
    proc = _workers().get(run.id)
    running_here = proc is not None and proc.poll() is None
    if (run.status == "running" and can_start and running_here
            and st.button("Stop run", key=f"prelabel_stop_{run.id}")):
        assert proc is not None
        # The worker turns SIGTERM into a clean stop: saved items stay, the run is marked
        # failed, and the next run resumes from the cache.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    fraction = run.done / run.total if run.total else (1.0 if run.status == "done" else 0.0)
    st.progress(min(max(fraction, 0.0), 1.0), text=f"{run.done} of {run.total} trajectories")
    cols = st.columns(6)
    for col, (label, value) in zip(cols, [
        ("Labelled", f"{run.labelled:,}"), ("Cached", f"{run.cached:,}"),
        ("Failed", f"{run.failed:,}"), ("API calls", f"{run.calls:,}"),
        ("Tokens", f"{run.tokens:,}"), ("Est. cost", f"${run.estimated_cost:,.4f}"),
    ], strict=True):
        col.metric(label, value)
    if run.status == "interrupted":
        st.warning("The worker stopped reporting (its heartbeat is stale: killed or the machine "
                   "restarted). Completed items are kept; start a run again to resume.")
    if run.status == "failed":
        tail = _log_tail(run.id)
        st.error("The run stopped before finishing; completed items are kept and the next run "
                 "resumes from them.")
        if tail:
            st.code(tail, language=None)


#: The shown run's status at the panel's last refresh (a change from running ends the refresh).
LIVE_STATUS = "prelabel_live_status"
# The panel refreshes itself only while its run runs: a page left open on a finished run does
# not poll the store every second, and a timer firing as the page's own run ended now and then
# left the elements drawn below the panel undrawn (the table of recent runs never appeared).
_running = (shown := _shown_run()) is not None and shown.status == "running"
live_run = st.fragment(run_every=1.0 if _running else None)(_live_run)
live_run()
if not _running:
    st.caption("A run started elsewhere (the command line) shows when the page is opened "
               "again.")

# -- recent runs --------------------------------------------------------------------------------
st.subheader("Recent runs")
runs = store.prelabels.latest_runs(20)
if runs:
    # Fixed narrow columns so the whole row fits the page at 1280 px (the finish time and the
    # API-call count are on the run's own panel above).
    st.dataframe(
        pd.DataFrame([{
            "run": r.id,
            "labeller": r.labeller if r.model in ("", r.labeller) else f"{r.labeller} · {r.model}",
            "status": r.status, "progress": f"{r.done:,} of {r.total:,}",
            "labelled": r.labelled, "cached": r.cached, "failed": r.failed, "tokens": r.tokens,
            "cost": r.estimated_cost, "started": r.started_at.strftime("%Y-%m-%d %H:%M"),
        } for r in runs]),
        hide_index=True, key="prelabel_runs_table",
        column_config={
            "run": st.column_config.NumberColumn("run", width=44),
            "labeller": st.column_config.TextColumn("labeller", width=170),
            "status": st.column_config.TextColumn("status", width=66),
            "progress": st.column_config.TextColumn("progress", width=96),
            "labelled": st.column_config.NumberColumn("labelled", width=64),
            "cached": st.column_config.NumberColumn("cached", width=58),
            "failed": st.column_config.NumberColumn("failed", width=52),
            "tokens": st.column_config.NumberColumn("tokens", width=70),
            "cost": st.column_config.NumberColumn("est. $", format="%.4f", width=62,
                                                  help="Estimated cost in USD"),
            "started": st.column_config.TextColumn("started (UTC)", width=124),
        },
    )
    st.caption("Cost is an estimate from list prices; check current pricing.")
else:
    st.caption("No runs yet.")

# -- what the pre-labels say, and who looks at them ---------------------------------------------
st.subheader("Pre-labels of the failures")
taxonomy = load_run_taxonomy(None)


@st.cache_data(ttl=5, show_spinner=False)
def _records(url: str, ids: tuple[str, ...], labeller_name: str, model_name: str,
             taxonomy_version: str, runs_stamp: tuple[Any, ...]) -> list[dict[str, Any]]:
    # Keyed by the store, by the labeller so that switching the radio shows that labeller's
    # pre-labels, and by the newest run's progress so that new pre-labels show as soon as a run
    # writes them.
    found = prelabel_confidences(
        get_store_for(url), ids, PrelabelOptions(labeller=labeller_name, model=model_name or None),
        taxonomy)
    return [{"trajectory_id": tid, "category": rec.result.category,
             "confidence": rec.result.confidence}
            for tid, rec in found.items() if rec is not None and rec.result is not None]


rows = _records(settings.annotations_url(), tuple(failures), options.labeller,
                options.model or "", taxonomy.version,
                tuple((r.id, r.status, r.done) for r in runs[:1]))
st.caption(f"{labeller_identity(options)[1]} on taxonomy `{taxonomy.version}`: "
           f"{len(rows):,} of {len(failures):,} failures pre-labelled.")
# Counts over every item's pre-label tell an annotator in blind mode (or one who hides the
# pre-label until committing) what the hidden pre-labels say: the store decides who sees them.
sees_distribution = store.prelabels.sees_distribution(viewer_of(user))
if rows and not sees_distribution:
    st.caption("The distribution of the pre-labels is shown to leads and admins only (blind "
               "mode, or pre-labels hidden until you commit).")
if rows and sees_distribution:
    df = pd.DataFrame(rows)
    names = {c.key: c.name for c in taxonomy.categories}
    df["category"] = df["category"].map(lambda k: names.get(k, k))
    a, b = st.columns(2)
    with a:
        st.markdown("**Categories**")
        st.bar_chart(df["category"].value_counts().rename("trajectories"), horizontal=True)
    with b:
        st.markdown("**Confidence**")
        bins = pd.cut(df["confidence"], bins=[i / 10 for i in range(11)], include_lowest=True)
        hist = bins.value_counts().sort_index()
        hist.index = [f"{iv.left:.1f}–{iv.right:.1f}" for iv in hist.index]
        st.bar_chart(hist.rename("trajectories"))

    render_routing(store, failures)
