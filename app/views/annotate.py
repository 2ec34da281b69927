"""Annotate: label why failed trajectories failed, one item at a time, from your own queue.

One screen per decision (1440x900 and 1280x800): the question, the step cursor (the step under
it in full, its neighbours and the rest folded to one line each) and the answer diff with the
reference SQL on the left, the label form with the pre-label on the right; K/J move the cursor,
F marks its step as the first faulty one, a category key saves both. The item view and the form
live in one fragment, so saving a label and moving on re-runs only the panel. Leads and admins
create assignments below the panel.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from faillab.app.auth import NEWCOMER_KEY, require_user
from faillab.app.state import (
    data_key,
    get_settings,
    get_store,
    load_trajectory,
    on_reader,
    workspace,
)
from faillab.app.viewer import automatic_opinions_visible, viewer_of
from faillab.app.widgets.answer import render_answer_compact
from faillab.app.widgets.evidence import prefetch_evidence, render_evidence
from faillab.app.widgets.key_help import key_help
from faillab.app.widgets.keymap import ACCEPT_PRELABEL, AGENT_RIGHT, SKIP, UNDO, UNDO_TOO
from faillab.app.widgets.label_form import (
    ITEM_PARAM,
    NOTE,
    UNSAVED,
    Hooks,
    render_label_form,
    render_last_saved,
    render_visible_labels,
)
from faillab.app.widgets.outage import outage_retried
from faillab.app.widgets.page_keys import item_key, page_keys
from faillab.app.widgets.queue import render_assignment_form, render_progress
from faillab.app.widgets.rubric import category_label, render_rubric
from faillab.app.widgets.safe import code_html, escape_markdown, plain
from faillab.app.widgets.sandbox_run import rerun_button, sql_steps, step_rerun_control
from faillab.app.widgets.step_cursor import CURSOR_KEYS, render_step_cursor, starting_step
from faillab.app.widgets.undo import (
    DONE_KEY,
    REVISIT_KEY,
    UNDONE_KEY,
    render_undo,
    render_undo_note,
)
from faillab.app.widgets.verdict import render_verdict
from labeling.queue import (
    failed_frame,
    prelabel_for,
    queue_state,
    take_unassigned,
)
from labeling.store import User
from labeling.store.records import LEAD_ROLES
from opinions.learn.trust import machine_routing
from opinions.ranking import classifier_ranking
from taxonomy import Taxonomy, default_taxonomy

SKIPPED_KEY = "annotate_skipped"
#: Whether this session has shown an item yet (a new session may be one that lost its key).
ITEM_SHOWN = "annotate_item_shown"
TAKE_N = 25
#: Items ahead whose data and evidence are warmed while the current one is read.
PREFETCH = 3

user = require_user()
settings = get_settings()
store = get_store()
ws = workspace()


@st.cache_resource
def _taxonomy() -> Taxonomy:
    return default_taxonomy()


taxonomy = _taxonomy()
if not st.session_state.get("annotate_taxonomy_saved"):
    # Keep the rubric every label refers to, so old labels stay interpretable after edits.
    store.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())
    st.session_state["annotate_taxonomy_saved"] = True


@st.cache_data(max_entries=4, show_spinner=False)
def _failed_ids_cached(root: str, signature: tuple[Any, ...]) -> list[str]:
    # The failures change only when the workspace's data does (its signature).
    return [str(t) for t in on_reader(lambda: failed_frame(ws))["id"]]


def _failed_ids() -> list[str]:
    return _failed_ids_cached(*data_key())


def _left_to_machine() -> frozenset[str]:
    """The items routing by measured trust leaves to their labeller (``opinions.learn.trust``;
    kept while the pre-labels and the calibration stand, so a key costs one store read)."""
    return machine_routing(store, target=settings.routing_target,
                           min_checked=settings.routing_min_checked,
                           spot_check_share=settings.spot_check_share).left_to_machine


def _to_front(todo: list[str], tid: str) -> None:
    """Move ``tid`` (in ``todo``) to the front of the queue shown."""
    todo.remove(tid)
    todo.insert(0, tid)


def _take(me: User) -> None:
    """Button callback (one script run shows the first item, not a run plus a rerun)."""
    n = on_reader(lambda: take_unassigned(store, ws, me.name, TAKE_N,
                                          left_to_machine=_left_to_machine(),
                                          overlap=settings.take_overlap))
    if n == TAKE_N:
        msg = f"{n} failures added to your queue."
    elif n:
        msg = (f"Only {n} unassigned failures need a person (the others are assigned, or "
               f"left to a labeller people trust; see the Pre-label page); {n} added.")
    else:
        msg = ("No unassigned failure needs a person: every failure is assigned or left to "
               "a labeller people trust (the Pre-label page says why each item went where).")
    st.session_state["annotate_take_msg"] = msg


def _empty_queue(me: User, skipped: list[str], queue: list[str]) -> None:
    if skipped and queue:
        st.info(f"You skipped {len(skipped)} item(s); nothing else is waiting.")
        st.button("Revisit skipped items", key="annotate_revisit_skipped",
                  on_click=skipped.clear)
        return
    st.success("Your queue is empty. A lead assigns more work on this page.")
    st.button(f"Take {TAKE_N} unassigned failures", key="annotate_take", on_click=_take,
              args=(me,))


def _my_labels(me: User) -> None:
    """The labels this person gave, newest first; choosing one reopens it to change."""
    df = store.labels.frame()
    own = df[(df["source"] == "human") & (df["annotator"] == me.name)]
    if own.empty:
        st.caption("You have given no label yet.")
        return
    latest = own.drop_duplicates("trajectory_id", keep="last").iloc[::-1]
    counts = own.groupby("trajectory_id").size()
    view = pd.DataFrame({
        "trajectory": latest["trajectory_id"].astype(str),
        "category": [category_label(taxonomy, c) for c in latest["category"]],
        "labels given": [int(counts[t]) for t in latest["trajectory_id"]],
        "when": latest["created_at"],
    })
    event = st.dataframe(view, hide_index=True, key="annotate_my_labels",
                         on_select="rerun", selection_mode="single-row", height=240)
    rows = event.selection.rows if event is not None else []
    if rows:
        st.session_state[REVISIT_KEY] = str(view.iloc[rows[0]]["trajectory"])
        st.rerun()


@st.fragment
@outage_retried
def labelling_panel(me: User) -> None:
    # The failures come from the page's cache (read on a reader thread, whose DuckDB
    # connection is already open): the ranking itself reads only the store.
    ranking = classifier_ranking(store, ws, min_labels=settings.rerank_min_labels,
                                 failed_ids=_failed_ids())
    state = queue_state(store, _failed_ids(), me.name,
                        prelabel_threshold=settings.prelabel_threshold,
                        spot_check_share=settings.spot_check_share, ranking=ranking,
                        left_to_machine=_left_to_machine())
    skipped: list[str] = st.session_state.setdefault(SKIPPED_KEY, [])
    done: list[str] = st.session_state.setdefault(DONE_KEY, [])
    revisit = st.session_state.get(REVISIT_KEY)
    todo = [tid for tid in state.waiting if tid not in skipped]
    undone = st.session_state.get(UNDONE_KEY)
    if isinstance(undone, str) and not isinstance(revisit, str):
        if undone in todo:
            _to_front(todo, undone)
        else:  # an earlier label of theirs counts again: show it, to change if they wish
            revisit = undone
    unsaved = st.session_state.get(UNSAVED)
    if isinstance(unsaved, str) and not isinstance(revisit, str):
        # A key the store could not save: the same item again, first, with its message (the
        # queue's order may have changed while the store was away).
        if unsaved in todo:
            _to_front(todo, unsaved)
        else:
            del st.session_state[UNSAVED]  # labelled meanwhile, or no longer this person's
    # The item on screen is kept in the address (?item=), so a new session (a replica that
    # restarted under the page, a reload) opens where the person was instead of wherever the
    # queue's order has moved: a key that died with the old session shows as not taken.
    at_url = st.query_params.get(ITEM_PARAM)
    restored = False
    if isinstance(at_url, str) and at_url in todo and not isinstance(undone, str) \
            and not isinstance(st.session_state.get(UNSAVED), str):
        _to_front(todo, at_url)
        restored = ITEM_SHOWN not in st.session_state
    skipped_now = [tid for tid in skipped if tid in state.waiting]
    # Said under the form, not as a toast: a toast covered the pre-label box.
    take_msg = st.session_state.pop("annotate_take_msg", None)
    if take_msg:
        st.session_state["annotate_take_note"] = take_msg
    if not todo and not isinstance(revisit, str) and st.session_state.pop(NEWCOMER_KEY, False):
        # Local use: someone who has just typed a new name gets work at once, without a lead's
        # plan or a button (items already in anyone's queue stay theirs).
        _take(me)
        st.rerun()
    tid = revisit if isinstance(revisit, str) else (todo[0] if todo else None)
    if st.query_params.get(ITEM_PARAM) != tid and not isinstance(revisit, str):
        if tid is None:
            st.query_params.pop(ITEM_PARAM, None)
        else:
            st.query_params[ITEM_PARAM] = tid
    st.session_state[ITEM_SHOWN] = tid
    if tid is None:
        render_last_saved(taxonomy)
        render_undo_note()
        if note := st.session_state.get("annotate_take_note"):
            st.caption(note)
        _empty_queue(me, skipped, state.waiting)
        # The last save of a queue can be undone too (a button's width, not the page's).
        render_undo(store, me, taxonomy, container=st.columns([1, 4])[0])
        return
    traj = load_trajectory(tid)
    if traj is None:
        st.error(f"Trajectory {escape_markdown(tid)} is assigned but not in this workspace.")
        st.session_state.pop(REVISIT_KEY, None)
        return
    # The next item always opens at its question (a mouse save used to leave it mid-page).
    page_keys()
    # While this item is read, load the next ones and execute their evidence in the background.
    prefetch_evidence([t for t in todo[:PREFETCH + 1] if t != tid][:PREFETCH])

    left, right = st.columns([11, 9], gap="medium")
    with left, st.container(key="annotate_view", gap="xsmall"):
        if isinstance(revisit, str):
            head = (f"**Changing your label** on `{tid}` · saving adds a new label, the "
                    "earlier one stays in the history")
        else:
            head = (f"**Item {state.position(len(skipped_now))} of {state.needed}** · "
                    f"{state.labelled} labelled · {len(skipped_now)} skipped · `{tid}`")
        st.markdown(head, help=(f"{state.not_for_you} assigned item(s) need no label from "
                                "you: confidently pre-labelled (left to the LLM) or no longer "
                                "failures.") if state.not_for_you else None)
        with st.container(key="annotate_question"), st.container(key=item_key(tid)):
            plain(traj.task.question)
        # One line: intent, scope and run; the model and template are one hover away.
        meta = [traj.task.intent, traj.task.scope, f"{len(traj.steps)} steps", traj.run.name]
        more = {"run": traj.run.name, "model": traj.run.model,
                "template": traj.task.template_id}
        with st.container(key="annotate_meta"):
            st.caption(" · ".join(escape_markdown(str(v)) for v in meta if v),
                       help=" · ".join(f"{k}: {v}" for k, v in more.items() if v) or None)

        # What went wrong first, then where: the answer row sits above the steps.
        ans, ref = st.columns(2, gap="small")
        with ans, st.container(key="annotate_answer"):
            render_answer_compact(traj)
        with ref, st.container(key="annotate_reference", gap="xsmall"):
            # The Re-run button shares the heading's row: a row of its own pushed the step
            # under the cursor off a 1280x800 screen. Its result goes under the SQL.
            heading = st.columns([3, 2], gap="small", vertical_alignment="center")
            heading[0].markdown("**Reference SQL**")
            if traj.task.reference_sql:
                st.html(code_html(traj.task.reference_sql, "sql", max_height_px=96))
                # Without an EHR the steps' re-run box already says so (when there are SQL
                # steps): one line, not two.
                with heading[1]:
                    rerun_button(f"{tid}_reference", traj.task.reference_sql,
                                 label="Re-run", say_no_ehr=not sql_steps(traj.steps),
                                 result_in=ref, icon=None)
            else:
                st.caption("The task carries no reference SQL.")
        # The store says whether this person may see the automatic opinions here; the toggle
        # below can only hide more.
        hide_mine = True if st.session_state.get("annotate_hide_prelabel",
                                                 settings.hide_prelabel) else None
        opinions_hidden = tid not in automatic_opinions_visible(store, [tid], me,
                                                                hide_prelabel=hide_mine)
        # The pre-label as the store lets this person see it: None while it is hidden, with
        # a flag saying one is there (the page never holds a hidden pre-label).
        prelabel, hide_prelabel = prelabel_for(store, tid, viewer_of(me, hide_prelabel=hide_mine))
        with st.container(key="annotate_steps_pane"):
            # The evidence leads the pane; its suggested category stays hidden with the pre-label.
            step = render_evidence(traj, key=f"annotate_{tid}", compact=True,
                                   show_category=not opinions_hidden)
            # One collapsed re-run box for every SQL step, as on the Trajectory page: a Re-run
            # button in each full step was a dozen elements remounted on every label key.
            step_rerun_control(f"annotate_{tid}", traj.steps)
            shown_step = (prelabel.first_error_step
                          if prelabel is not None and not hide_prelabel else None)
            render_step_cursor(traj.steps, tid, start=starting_step(
                traj.steps, evidence_step=step, prelabel_step=shown_step))
    def saved(done_tid: str) -> None:
        if done_tid in done:
            done.remove(done_tid)
        done.append(done_tid)
        st.session_state.pop(REVISIT_KEY, None)
        st.session_state.pop(UNDONE_KEY, None)

    def skip(skip_tid: str) -> None:
        st.session_state.pop(UNDONE_KEY, None)
        if st.session_state.get(UNSAVED) == skip_tid:
            del st.session_state[UNSAVED]  # put aside on purpose: it waits at the end
        skipped.append(skip_tid)
        st.session_state["annotate_skip_note"] = f"Skipped {skip_tid[:12]}: it waits at the end."

    def leave_revisit() -> None:
        st.session_state.pop(REVISIT_KEY, None)
        st.session_state.pop(UNDONE_KEY, None)

    outcome = on_reader(lambda: ws.verdict_of(tid))
    undecided = outcome is not None and outcome.get("recorded_success") is None \
        and outcome.get("judge_verdict") == "undecided"

    def labelled(done_tid: str) -> None:
        # A failure label on an item the judge could not decide says the agent failed.
        if undecided:
            store.verdicts.record(done_tid, "incorrect", me.name,
                                  note="labelled as a failure on Annotate")
        saved(done_tid)

    with right, st.container(key="annotate_form"):
        with st.container(key="annotate_verdict"):
            render_verdict(store, tid, me, outcome, key="annotate", failed_button=False,
                           compact=True, note_key=NOTE, recorded=lambda t, v: saved(t))
        nav = render_label_form(store, traj, taxonomy, me, prelabel=prelabel,
                                hide_prelabel=hide_prelabel,
                                hooks=Hooks(saved=labelled, skipped=skip))
        # Callbacks, like the label buttons: the run they trigger already shows the new item.
        render_undo(store, me, taxonomy, enabled=not isinstance(revisit, str), container=nav[1])
        if isinstance(revisit, str):
            nav[2].button("Back to queue", key="annotate_leave_revisit", width="stretch",
                          on_click=leave_revisit)
        # Banners go under the form, so the buttons never move when one appears.
        render_last_saved(taxonomy)
        if take_msg:
            st.info(take_msg, icon=":material/inbox:")
        if note := st.session_state.pop("annotate_skip_note", None):
            st.info(note, icon=":material/skip_next:")
        render_undo_note()
        if restored:
            st.info("Back where you were: this item has no label of yours yet (a key pressed "
                    "as the connection dropped was not saved).", icon=":material/history:")
        render_visible_labels(store, tid, me, blind=settings.blind, taxonomy=taxonomy)


labelling_panel(user)

st.divider()
hide_setting = settings.hide_prelabel
st.toggle(
    "Hide the LLM pre-label until I commit", value=hide_setting, key="annotate_hide_prelabel",
    disabled=hide_setting,
    help="Against anchoring: the label records whether the pre-label was on screen."
         + (" This workspace always hides it." if hide_setting else ""),
)
annotate_keys = [*CURSOR_KEYS,
                 (f"1–{min(9, len(taxonomy.categories))}",
                  "save that category (with the marked step)"),
                 (ACCEPT_PRELABEL, "accept the pre-label (its step once you have seen it)"),
                 (AGENT_RIGHT, "the agent was right (no failure)"), (SKIP, "skip"),
                 (f"{UNDO} or {UNDO_TOO}", "undo the last label"),
                 ("Ctrl+Enter", "in the note: keep it and give the keys back")]
key_help(annotate_keys)
st.caption("Keys: " + " · ".join(f"{k}: {what}" for k, what in annotate_keys)
           + ". Blind mode is "
           + ("on: you never see other annotators' labels." if settings.blind else "off."))
with st.expander("My labels (choose one to change it)", expanded=False):
    _my_labels(user)
with st.expander("Rubric", expanded=False):
    render_rubric(taxonomy, height=420)
if user.role in LEAD_ROLES:
    with st.expander("Queues and assignments", expanded=not store.queues.progress()):
        render_assignment_form(store, ws, user.name)
with st.expander("Progress per annotator", expanded=False):
    render_progress(store, _failed_ids(), viewer=viewer_of(user),
                    prelabel_threshold=settings.prelabel_threshold,
                    spot_check_share=settings.spot_check_share,
                    left_to_machine=_left_to_machine())
