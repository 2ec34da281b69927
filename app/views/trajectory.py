"""One trajectory: question and metadata on top, steps on the left, the answer on the right.

Deep link: /trajectory?id=<trajectory id>.

Below the reference SQL, the raw record: the trajectory's imported JSON, collapsed and built only
when opened. Steps show their duration and token counts where the log recorded them.

Keys (``keymap``): ``]``/``[`` the next/previous failure, J/K the next/previous step in the
steps pane (as on Annotate), Y/N the verdict.

Everything that depends on the shown trajectory is one ``st.fragment``: ``]``/``[`` (failures),
"Expand all" and opening a step rerun only the fragment, in one script run; the steps' re-run
box (one collapsed expander above the steps, its buttons built when opened) and the reference
SQL's "Re-run" are fragments inside it, so opening the box or a re-run redraws only itself.
Before, the failure keys went through ``st.switch_page``: a run of the whole app to register the
press, then a second full run (main.py, sign-in, sidebar, this page) to show the next one.
"""

from __future__ import annotations

import json

import streamlit as st

from faillab.app.auth import current_user
from faillab.app.state import (
    existing_store,
    failure_neighbours_of,
    first_failure_id,
    get_store,
    in_background,
    load_trajectory,
    on_reader,
    warm_sandbox,
    workspace,
)
from faillab.app.viewer import automatic_opinions_visible, viewer_of
from faillab.app.widgets.answer import render_answer_panel
from faillab.app.widgets.evidence import prefetch_evidence, render_evidence
from faillab.app.widgets.key_help import key_help
from faillab.app.widgets.keymap import ITEM_NEXT, ITEM_PREVIOUS, item_keys, steps_keys
from faillab.app.widgets.outage import outage_retried
from faillab.app.widgets.prelabel_reasoning import render_prelabel_reasoning
from faillab.app.widgets.safe import code_html, escape_html, escape_markdown
from faillab.app.widgets.sandbox_run import rerun_button, step_rerun_control
from faillab.app.widgets.stats_data import people_verdicts_of
from faillab.app.widgets.steps import render_steps, steps_css
from faillab.app.widgets.verdict import FAILED_KEY, NOTE_KEY, RIGHT_KEY, render_verdict
from trajectories.model import Step, Trajectory
from trajectories.outcome import outcome_name, resolve_recorded
from trajectories.views import BrowseFilter

# Start the SQL sandbox's worker now, in the background, so the first "Re-run" click does not
# wait for a new interpreter to import DuckDB (a no-op once it runs).
warm_sandbox()


@st.fragment
def _rerun_box(key: str, sql: str, label: str = "Re-run SQL") -> None:
    # A fragment of its own: a click re-runs and redraws this button and its result only, not
    # the whole trajectory around it (which cost about 1 s of browser work per click).
    rerun_button(key, sql, label=label)


@st.fragment
def _step_rerun(key: str, steps: list[Step]) -> None:
    # One box for the pane, not a button in every step (see ``step_rerun_control``); a
    # fragment for the same reason as above.
    step_rerun_control(key, steps)


def _verdict_box(trajectory_id: str) -> None:
    """Was the agent right? The automatic verdict, people's, and Y / N to give one."""
    user = current_user()
    # Someone signed in may record a verdict (that creates the store); a visitor only reads.
    store = get_store() if user is not None else existing_store()
    outcome = on_reader(lambda: workspace().verdict_of(trajectory_id))
    # The evidence is in the answer panel below: the box says the verdicts only.
    render_verdict(store, trajectory_id, user, outcome, key="trajectory", note_key=NOTE_KEY,
                   evidence=False)
    if user is not None:
        st.text_input("Verdict note (optional)", key=NOTE_KEY, label_visibility="collapsed",
                      placeholder="Why? (optional, saved with Y or N)")


def _outcome(trajectory_id: str) -> str:
    """The trajectory's outcome by the one rule (``trajectories.outcome``): people's verdicts
    as this viewer may see them, else the recorded outcome, else the judge's."""
    stored = on_reader(lambda: workspace().verdict_of(trajectory_id))
    people = people_verdicts_of(viewer_of(current_user()))
    return outcome_name(resolve_recorded(trajectory_id, stored, people))


def _raw_record(traj: Trajectory) -> None:
    """The trajectory's record as imported (the workspace's JSON of it, read by the page's
    ``load_trajectory``), in a collapsed expander built only when opened: it is never on the
    first screen, and a long record would cost every run its JSON and its bytes on the wire.
    Shown as a code block: the text stays text, whatever the producer wrote in it."""
    box = st.expander("Raw record (imported JSON)", expanded=False,
                      key=f"raw_record_{traj.id}", on_change="rerun")
    with box:
        if box.open:
            record = json.dumps(traj.model_dump(mode="json"), indent=2, ensure_ascii=False)
            st.caption(f"{len(record):,} characters: the trajectory as the workspace stores it "
                       "(fields the format does not name are kept as they were imported).")
            st.code(record, language="json", wrap_lines=True, height=480)


def _show(trajectory_id: str) -> None:
    # A callback: it runs before the fragment's rerun, so that run draws the new trajectory and
    # the URL (the deep link) follows it.
    st.query_params["id"] = trajectory_id


@st.fragment
@outage_retried
def trajectory_view() -> None:
    trajectory_id = st.query_params.get("id") or first_failure_id()
    if not trajectory_id:
        st.title("Trajectory")
        st.info("No trajectory to show: the workspace is empty.")
        return

    traj = load_trajectory(trajectory_id)
    if traj is None:
        st.title("Trajectory")
        st.error(f"No trajectory with id {escape_markdown(trajectory_id)} in this workspace.")
        return
    if st.query_params.get("id") != trajectory_id:
        st.query_params["id"] = trajectory_id

    # The steps' style block first: the browser fetches the script that draws HTML blocks when
    # the first one arrives, so it loads while the server computes the row above the steps.
    steps_css()
    task, run = traj.task, traj.run
    saved = st.session_state.get("browse_filter")
    flt = saved if isinstance(saved, BrowseFilter) else None
    # The two slow parts of a new trajectory, the evidence (its SQL executed in the sandbox)
    # and the prev/next failure query, start now in the background and overlap with drawing
    # the steps; the evidence box and the failure buttons below take their cached results.
    prefetch_evidence([trajectory_id])
    in_background(lambda: failure_neighbours_of(trajectory_id, flt), "faillab-neighbours")

    top = st.columns([3, 1, 1])  # room for each button and its key hint, unclipped
    with top[0]:
        st.caption(f"Trajectory {traj.id} · run {escape_markdown(run.name)} · model "
                   f"{escape_markdown(run.model)} · rollout {run.rollout} · "
                   f"outcome: **{_outcome(trajectory_id)}**")
    prev_slot, next_slot = top[1].empty(), top[2].empty()
    # The Keys button and its script are drawn last, in their place: the browser fetches the
    # component's scripts (and Arrow's) when it arrives, after the steps, not before them.
    keys_slot = top[0].container()

    meta = {
        "intent": task.intent, "scope": task.scope, "template": task.template_id,
        "split": task.split, "task": task.id,
        "noise pair": (f"{task.pair_id} "
                       f"({', '.join(v for v in (task.variant, task.noise_type) if v)})"
                       if task.pair_id else None),
    }
    # One HTML block (heading, question, metadata), escaped: three elements fewer to draw.
    st.html('<h3 class="faillab-heading">Question</h3>'
            f'<p class="faillab-message-text">{escape_html(task.question)}</p>'
            '<p class="faillab-note">'
            + " · ".join(f"{k}: {escape_html(v)}" for k, v in meta.items() if v) + "</p>")

    left, right = st.columns([3, 2], gap="medium")
    with left:
        head = st.columns([3, 1])
        head[0].markdown(f"**Steps** ({len(traj.steps)}; {traj.n_turns} agent turns)")
        expand_all = head[1].toggle("Expand all", key="expand_all")

        if not traj.steps:
            st.caption("No steps: the producer recorded the final answer only (a results "
                       "table). The answer and its verdicts are on the right.")
        _step_rerun(trajectory_id, traj.steps)
        # The steps scroll in their own pane so the answer column stays in view beside them.
        with st.container(height=900, border=False, key="steps_pane", autoscroll=False):
            render_steps(traj.steps, expand_all=expand_all, key_prefix=trajectory_id)
    with right:
        with st.container(key="trajectory_verdict"):
            _verdict_box(trajectory_id)
        # Its suggested category is an automatic opinion, hidden where the pre-label is.
        user = current_user()
        suggestion_shown = trajectory_id in automatic_opinions_visible(
            get_store() if user is not None else existing_store(), [trajectory_id], user)
        render_evidence(traj, key=trajectory_id, show_category=suggestion_shown)
        # The pre-labeller's category, step and reasoning, by the store's rule (as on Annotate).
        render_prelabel_reasoning(get_store() if user is not None else existing_store(), traj,
                                  user)
        render_answer_panel(traj)
        if task.reference_sql:
            st.html('<div class="faillab-step-title">Reference SQL</div>'
                    + code_html(task.reference_sql, "sql"))
            _rerun_box(f"{traj.id}_reference", task.reference_sql, label="Re-run reference SQL")
        else:
            st.markdown("**Reference SQL**")
            st.caption("The task carries no reference SQL.")
        _raw_record(traj)

    prev_id, next_id = failure_neighbours_of(trajectory_id, flt)
    # ``[`` and ``]`` press these through the page script: Streamlit binds no punctuation.
    prev_slot.button("◀ Prev failure", key="prev_failure",
                     disabled=prev_id is None, help=f"Previous failed trajectory ({ITEM_PREVIOUS})",
                     on_click=_show, args=(str(prev_id),))
    next_slot.button("Next failure ▶", key="next_failure",
                     disabled=next_id is None, help=f"Next failed trajectory ({ITEM_NEXT})",
                     on_click=_show, args=(str(next_id),))
    with keys_slot:
        key_help([*item_keys("failure"), *steps_keys(),
                  (RIGHT_KEY, "the agent was right"), (FAILED_KEY, "the agent failed")],
                 clicks={ITEM_PREVIOUS: "prev_failure", ITEM_NEXT: "next_failure"},
                 steps=".st-key-steps_pane .faillab-step")


trajectory_view()
