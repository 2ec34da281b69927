"""The first-divergence evidence of a failed trajectory: the marked step, the diverging part,
the rows the sandbox returned and the suggested category. Pages call ``render_evidence``."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import streamlit as st

from faillab.app.auth import current_user
from faillab.app.state import (
    EhrKey,
    ehr_key,
    in_background,
    load_trajectory,
    on_reader,
    workspace,
)
from faillab.app.viewer import viewer_of
from faillab.app.widgets.safe import code_html, escape_html, escape_markdown
from faillab.app.widgets.stats_data import people_verdicts_of
from faillab.app.widgets.steps import steps_css
from taxonomy import TaxonomyError, default_taxonomy
from trajectories.model import Trajectory
from trajectories.outcome import resolve_recorded, trajectory_success


def _display_name(category: str) -> str:
    """The finder suggests categories of the default taxonomy by key; people read names."""
    try:
        return default_taxonomy().category(category).name
    except (KeyError, TaxonomyError):
        return category


@st.cache_data(max_entries=512, show_spinner=False)
def _evidence(trajectory_json: str, ehr: EhrKey | None) -> dict[str, object]:
    # Keyed by the trajectory's content and the EHR file's (path, mtime, size): a rebuilt
    # database gives fresh evidence, an unchanged one is not re-executed on every rerun.
    from pathlib import Path

    from trajectories.evidence import Probe, find_divergence

    traj = Trajectory.model_validate_json(trajectory_json)
    # Agent SQL runs in the sandbox's worker processes, never in the server's own memory.
    probe = Probe.isolated(Path(ehr[0])) if ehr else None
    return find_divergence(traj, probe=probe).to_dict()


def _failed(traj: Trajectory, people: dict[str, bool | None] | None = None) -> bool:
    """Whether ``traj`` failed by the one outcome rule (``trajectories.outcome``): people's
    verdicts as the signed-in person may see them (``people``, when the caller has them),
    else the workspace's recorded and judged outcome, else the record's own."""
    if people is None:
        people = people_verdicts_of(viewer_of(current_user()))
    tid = traj.id or ""
    stored = on_reader(lambda: workspace().verdict_of(tid)) if tid else None
    if stored is None:
        return trajectory_success(traj, people) is False
    return resolve_recorded(tid, stored, people) is False


def _suggestion(found: dict[str, object], show_category: bool) -> str:
    """" · suggests Name (0.90)" as raw text, or "" where the category is hidden or unknown."""
    if not (show_category and found.get("category")):
        return ""
    confidence = float(found["confidence"])  # type: ignore[arg-type]
    return f" · suggests {_display_name(str(found['category']))} ({confidence:.2f})"


def _title(found: dict[str, object], show_category: bool) -> str:
    step, part = found.get("step"), found.get("part")
    return (f"Evidence · first divergence at step {step} · part `{part}`"
            + escape_markdown(_suggestion(found, show_category)))


def _body_html(found: dict[str, object]) -> str:
    """The reason, whether it was executed and the rows cited, escaped."""
    parts = [f'<p class="faillab-message-text">{escape_html(found.get("reason", ""))}</p>']
    if not found.get("executed"):
        parts.append('<p class="faillab-note">Structural comparison only: no EHR database to '
                     "execute on.</p>")
    rows = found.get("rows") or []
    assert isinstance(rows, list)
    if rows:
        parts.append(code_html("\n".join(str(r) for r in rows)))
    return "".join(parts)


def evidence_html(found: dict[str, object], show_category: bool) -> str:
    """The evidence box of the Trajectory page as one escaped HTML block: its title, the reason,
    whether it was executed and the rows cited (five Streamlit elements before; each costs the
    browser its own container and script on every deep link)."""
    if found.get("part") is None:
        return ('<div class="faillab-step"><div class="faillab-step-title">Evidence · nothing '
                f'decides</div><p class="faillab-note">{escape_html(found.get("reason", ""))}'
                "</p></div>")
    title = (f"Evidence · first divergence at step <b>{escape_html(found.get('step'))}</b> · "
             f"part <code>{escape_html(found.get('part'))}</code>"
             + escape_html(_suggestion(found, show_category)))
    return (f'<div class="faillab-step"><div class="faillab-step-title">{title}</div>'
            f"{_body_html(found)}</div>")


def _details(found: dict[str, object]) -> None:
    steps_css()
    st.html(_body_html(found))


_WARMING: set[str] = set()
_WARMING_LOCK = threading.Lock()


def prefetch_evidence(trajectory_ids: Sequence[str]) -> None:
    """Warm the trajectory, outcome and evidence caches for the items the annotator will see
    next.

    A new item's evidence executes the agent's SQL in the sandbox (0.2-0.8 s at 50K
    trajectories), loading the item costs another 0.1-0.4 s and its outcome a read of every
    part (over the network in an object store); done in a background thread
    while the annotator reads the current item, the next label key finds them cached. The
    caches are Streamlit's process-wide ones, so the thread needs no session; an item already
    being warmed is not queued twice.
    """
    ws = workspace()
    ehr = ws.ehr_path
    key = ehr_key(ehr) if ehr is not None and ehr.is_file() else None
    with _WARMING_LOCK:
        todo = [tid for tid in trajectory_ids if tid not in _WARMING]
        _WARMING.update(todo)
    if not todo:
        return

    def warm() -> None:
        for tid in todo:
            try:
                traj = load_trajectory(tid)
                on_reader(lambda: ws.verdict_of(tid))  # noqa: B023 - called at once
                # No session here: the workspace's outcome (warming only).
                if traj is not None and _failed(traj, {}):
                    _evidence(traj.model_dump_json(), key)
            except Exception:  # a warm-up failure only means a cold cache later
                pass
            finally:
                with _WARMING_LOCK:
                    _WARMING.discard(tid)

    # Without the page's run context, as every warm-up thread (see `in_background`): a thread
    # holding a session's context after its run ended made that session lose widget clicks.
    in_background(warm, "faillab-prefetch")


def render_evidence(traj: Trajectory | None, *, key: str, show_category: bool = True,
                    compact: bool = False) -> int | None:
    """Evidence for ``traj`` (failed trajectories only; nothing for None); ``show_category=False``
    hides the suggestion where annotators label blind. ``compact``: one line (diverging step,
    part, suggested category) with the reason and rows on expand, where the evidence shares a
    pane with the steps (Annotate) and must not crowd them out. Returns the diverging step's
    index (None: nothing diverged or nothing decides)."""
    if traj is None or not _failed(traj):
        return None  # not a failure: nothing diverged
    ehr = workspace().ehr_path
    found = _evidence(traj.model_dump_json(),
                      ehr_key(ehr) if ehr is not None and ehr.is_file() else None)
    if compact:
        if found.get("part") is None:
            with st.container(key=f"evidence_{key}"):
                st.caption("Evidence · nothing decides: "
                           + escape_markdown(str(found.get("reason", ""))))
            return None
        # Built only while open (the expander reruns on toggle): the closed line costs nothing.
        box = st.expander(_title(found, show_category), icon=":material/search:",
                          key=f"evidence_{key}", on_change="rerun")
        with box:
            if box.open:
                _details(found)
        return _step(found)
    steps_css()
    st.html(evidence_html(found, show_category))
    return _step(found)


def step_note(traj: Trajectory, prelabel_step: int | None) -> str | None:
    """One sentence on how the pre-label's first faulty step stands to the evidence's, so the
    page never shows two machine steps without saying which to believe (None: nothing to say).
    Reads the same cached evidence the page's evidence box computed."""
    if prelabel_step is None or traj.id is None or not _failed(traj):
        return None
    ehr = workspace().ehr_path
    found = _evidence(traj.model_dump_json(),
                      ehr_key(ehr) if ehr is not None and ehr.is_file() else None)
    step = _step(found)
    if step is None or found.get("part") is None:
        return None
    if step == prelabel_step:
        return f"Same step as the evidence (part `{found.get('part')}`)."
    return (f"The evidence points at step {step} (part `{found.get('part')}`), where the agent "
            f"first commits to what diverges from the reference; this pre-label names step "
            f"{prelabel_step} because it reads another category or another step: its rationale "
            "says which evidence it did not follow. Check both steps.")


def _step(found: dict[str, object]) -> int | None:
    step = found.get("step")
    return step if isinstance(step, int) else None
