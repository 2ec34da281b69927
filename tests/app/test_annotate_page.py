"""Annotate page in-process (AppTest): labelling from a queue, pre-labels, blinding, roles."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Selectbox

from faillab.app.widgets.label_form import ITEM_PARAM
from faillab.app.widgets.sandbox_run import sql_steps
from faillab_core.settings import Settings
from labeling.queue import create_assignments, failed_frame, queue_for
from labeling.store import Store, open_store
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord
from opinions.prelabel.heuristic import HeuristicLabeller
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace, shown_item
from tests.support import REPO
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")
VERSION = default_taxonomy().version


@pytest.fixture
def env(demo_workspace: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workspace, Store]]:
    root = copy_of(demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    store = open_store(Settings.from_env().annotations_url())
    store.users.add("ana", "annotator")
    store.users.add("ben", "annotator")
    store.users.add("lea", "lead")
    yield Workspace(root), store
    store.close()
    st.cache_resource.clear()


def open_page(user: str, page: str = "views/annotate.py", item: str | None = None) -> AppTest:
    """The page as ``user`` sees it; ``item``: the address names that item (?item=)."""
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.session_state["identity_name"] = user
    at.run()
    at.switch_page(page)
    if item is not None:
        at.query_params[ITEM_PARAM] = item
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def current_item(at: AppTest) -> str:
    return shown_item(at)


def position(at: AppTest) -> str:
    """The position line without its markup ("Item k of N · d labelled · s skipped")."""
    line = next(m.value for m in at.markdown if m.value.startswith("**Item "))
    return line.replace("**", "")


def step_picker(at: AppTest) -> Selectbox[Any]:
    """The first-faulty-step picker (its key changes whenever a mark is set elsewhere)."""
    pickers = [box for box in at.selectbox if str(box.key).startswith("lf_step_pick_")]
    assert len(pickers) == 1, [box.key for box in at.selectbox]
    return pickers[0]


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [str(d.value) for d in at.dataframe] + [h.value for h in at.html]
    return "\n".join(str(p) for p in parts)


def test_annotator_labels_an_item(env: tuple[Workspace, Store]) -> None:
    ws, store = env
    assert create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=2) == 2
    at = open_page("ana")
    tid = current_item(at)
    assert tid in set(failed_frame(ws)["id"])
    step_picker(at).set_value(1)
    at.selectbox(key="lf_secondary").set_value("answer_format_error")
    at.text_area(key="lf_note").input("joined the wrong table")
    at.button(key="lf_cat_sql_logic_error").click()
    at.run()
    assert not at.exception
    [label] = store.labels.for_item(tid, viewer=None, blind=False)
    assert (label.annotator, label.category, label.source) == ("ana", "sql_logic_error", "human")
    assert label.secondary_category == "answer_format_error"
    assert label.first_error_step == 1
    assert label.note == "joined the wrong table"
    assert label.taxonomy_version == default_taxonomy().version
    assert label.seconds_on_item is not None and label.seconds_on_item >= 0
    assert label.prelabel_shown is False
    # The taxonomy the label refers to is kept in the store.
    assert store.taxonomies.get(default_taxonomy().version) is not None
    # On to the next item.
    assert current_item(at) != tid
    assert any("Saved SQL Logic Error" in s.value for s in at.success)


def test_each_item_opens_with_an_empty_form(env: tuple[Workspace, Store]) -> None:
    """The form's widgets keep their keys from item to item; what was typed for one item
    never carries over to the next, whether it was saved or skipped."""
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=3)
    at = open_page("ana")
    first = current_item(at)
    step_picker(at).set_value(1)
    at.selectbox(key="lf_secondary").set_value("answer_format_error")
    at.text_area(key="lf_note").input("joined the wrong table")
    at.button(key="lf_cat_sql_logic_error").click()
    at.run()
    second = current_item(at)
    assert second != first
    assert step_picker(at).value is None
    assert at.selectbox(key="lf_secondary").value is None
    assert at.text_area(key="lf_note").value == ""
    # A half-filled form left by Skip is gone too, and the skipped item saves nothing.
    at.text_area(key="lf_note").input("not sure yet")
    step_picker(at).set_value(2)
    at.button(key="lf_skip").click()
    at.run()
    third = current_item(at)
    assert third not in (first, second)
    assert at.text_area(key="lf_note").value == ""
    assert step_picker(at).value is None
    at.button(key="lf_cat_stuck_in_loop").click()
    at.run()
    [label] = store.labels.for_item(third, viewer=None, blind=False)
    assert (label.category, label.note, label.first_error_step) == ("stuck_in_loop", None, None)
    assert store.labels.for_item(second, viewer=None, blind=False) == []


def test_skip_moves_on_and_queue_ends(env: tuple[Workspace, Store]) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=1)
    at = open_page("ana")
    tid = current_item(at)
    at.button(key="lf_skip").click()
    at.run()
    assert any("skipped 1 item" in i.value for i in at.info)
    assert store.labels.for_item(tid, viewer=None, blind=False) == []


def save_prelabel(store: Store, tid: str, category: str, confidence: float,
                  step: int = 2) -> None:
    key = PrelabelKey(tid, default_taxonomy().version, HeuristicLabeller.prompt_version,
                      "heuristic")
    store.prelabels.save(PrelabelRecord(key, LabelResult(
        category=category, confidence=confidence, first_error_step=step,
        rationale=f"step {step}: the query filters on the wrong column", labeller="heuristic",
        labeller_version="1")))


def test_accept_prelabel_records_that_it_was_shown(env: tuple[Workspace, Store]) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=1)
    [(tid, _, _)] = store.queues.assignments("ana")
    save_prelabel(store, tid, "semantic_misunderstanding", 0.4)
    at = open_page("ana")
    assert "the query filters on the wrong column" in texts(at)
    # The box names the labeller: this one is the offline heuristic, not an LLM.
    assert "**Pre-label (heuristic):** Semantic Misunderstanding" in texts(at)
    # The step is never prefilled from the pre-label; taking it is an explicit choice.
    assert step_picker(at).value is None
    at.checkbox(key="lf_accept_step").check()
    at.run()
    at.button(key="lf_accept").click()
    at.run()
    [label] = store.labels.for_item(tid, viewer=None, blind=False, include_llm=False)
    assert label.category == "semantic_misunderstanding"
    assert label.prelabel_shown is True
    assert (label.first_error_step, label.step_from_prelabel) == (2, True)


def _cursor_to(at: AppTest, target: int) -> None:
    """Move the step cursor with its buttons (K/J in the browser) until it is on ``target``."""
    for _ in range(200):
        cursor = at.session_state["lf_cursor"]
        if cursor == target:
            return
        at.button(key="annotate_step_next" if cursor < target else "annotate_step_prev").click()
        at.run()
        assert not at.exception
    raise AssertionError(f"the cursor never reached step {target}")


def test_accept_takes_the_prelabel_step_only_once_it_was_on_screen(
    env: tuple[Workspace, Store],
) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=2)
    first, second = (tid for tid, _, _ in store.queues.assignments("ana"))
    at = open_page("ana")
    shown = current_item(at)
    start = at.session_state["lf_cursor"]
    n_steps = len(ws.get(shown).steps)  # type: ignore[union-attr]
    # A pre-label whose step the cursor has not been on: accepting leaves the step unset.
    unseen = next(i for i in range(n_steps) if i != start)
    save_prelabel(store, shown, "semantic_misunderstanding", 0.4, step=unseen)
    at.run()
    assert "(not yet seen: Accept leaves it)" in texts(at)
    at.button(key="lf_accept").click()
    at.run()
    [label] = store.labels.for_item(shown, viewer=None, blind=False, include_llm=False)
    assert (label.category, label.first_error_step, label.step_from_prelabel) == (
        "semantic_misunderstanding", None, False)
    # On the next item the cursor visits the pre-label's step first: Accept takes it.
    other = current_item(at)
    assert other == ({first, second} - {shown}).pop()
    n_other = len(ws.get(other).steps)  # type: ignore[union-attr]
    target = n_other - 1 if at.session_state["lf_cursor"] != n_other - 1 else 0
    save_prelabel(store, other, "sql_logic_error", 0.4, step=target)
    at.run()
    _cursor_to(at, target)
    _cursor_to(at, 0 if target else n_other - 1)  # seen, then moved away again
    assert "(seen: Accept takes it)" in texts(at)
    at.button(key="lf_accept").click()
    at.run()
    [label] = store.labels.for_item(other, viewer=None, blind=False, include_llm=False)
    assert (label.first_error_step, label.step_from_prelabel) == (target, True)


def test_hidden_prelabel_is_revealed_after_commit(env: tuple[Workspace, Store],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ws, store = env
    monkeypatch.setenv("FAILLAB_HIDE_PRELABEL", "1")
    st.cache_resource.clear()
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=1)
    [(tid, _, _)] = store.queues.assignments("ana")
    save_prelabel(store, tid, "semantic_misunderstanding", 0.4)
    at = open_page("ana")
    assert "the query filters on the wrong column" not in texts(at)
    assert not [b for b in at.button if b.key == "lf_accept"]
    at.button(key="lf_cat_stuck_in_loop").click()
    at.run()
    [label] = store.labels.for_item(tid, viewer=None, blind=False, include_llm=False)
    assert label.prelabel_shown is False
    assert any("hidden LLM pre-label was Semantic Misunderstanding (differs)" in s.value
               for s in at.success)


def test_blind_annotator_never_sees_another_label(env: tuple[Workspace, Store]) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana", "ben"], overlap=2, double_share=1.0, limit=1)
    [(tid, _, _)] = store.queues.assignments("ana")
    store.labels.add(tid, "stuck_in_loop", annotator="ben", taxonomy_version=VERSION,
                     note="BEN-PRIVATE-NOTE")
    at = open_page("ana")
    assert current_item(at) == tid
    assert "BEN-PRIVATE-NOTE" not in texts(at)
    assert "Stuck-in-Loop" not in [str(v) for d in at.dataframe for v in d.value.values.ravel()]
    # A lead sees both on the same item (if it is in their queue they see it in the table).
    seen = store.labels.for_item(tid, viewer="lea", blind=True)
    assert [lab.annotator for lab in seen] == ["ben"]


def test_lead_creates_assignments_annotator_cannot(env: tuple[Workspace, Store]) -> None:
    _, store = env
    at = open_page("ana")
    assert not [f for f in at.get("form") if getattr(f, "form_id", "") == "assign_form"]
    assert "Your queue is empty" in " ".join(s.value for s in at.success)
    lead = open_page("lea")
    lead.multiselect(key="assign_annotators").set_value(["ana", "ben"])
    lead.number_input(key="assign_limit").set_value(10)
    lead.slider(key="assign_share").set_value(0.5)
    lead.button[[b.label for b in lead.button].index("Create assignments")].click()
    lead.run()
    assert not lead.exception
    assigned = store.queues.assignments()
    # 10 items, half of them (stratified) doubly annotated.
    assert len({t for t, _, _ in assigned}) == 10
    assert len(assigned) == 15
    progress = {p.annotator: p.assigned for p in store.queues.progress()}
    assert progress["ana"] + progress["ben"] == 15


def test_first_faulty_step_by_keys_cursor_then_mark_then_category(
    env: tuple[Workspace, Store],
) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=2)
    at = open_page("ana")
    tid = current_item(at)
    traj = ws.get(tid)
    assert traj is not None
    start = at.session_state["lf_cursor"]
    # The cursor opens on a step of this trajectory, drawn in full (and so seen).
    assert 0 <= start < len(traj.steps)
    assert start in at.session_state["lf_seen_steps"]
    target = start + 1 if start + 1 < len(traj.steps) else start - 1
    _cursor_to(at, target)
    assert step_picker(at).value is None  # moving marks nothing
    at.button(key="annotate_step_mark").click()
    at.run()
    assert step_picker(at).value == target
    assert at.button(key="annotate_step_mark").label == "Marked"
    at.button(key="lf_cat_sql_logic_error").click()
    at.run()
    [label] = store.labels.for_item(tid, viewer=None, blind=False, include_llm=False)
    assert (label.category, label.first_error_step, label.step_from_prelabel) == (
        "sql_logic_error", target, False)
    # The next item's cursor and mark start afresh.
    assert current_item(at) != tid
    assert step_picker(at).value is None


def _trust_every_measured_labeller(monkeypatch: pytest.MonkeyPatch) -> None:
    """Routing that leaves every pre-label of a measured labeller to it (target 0, no checked
    items needed): the page's handling of machine-left items, without labelling 30 first."""
    monkeypatch.setenv("FAILLAB_ROUTING_TARGET", "0")
    monkeypatch.setenv("FAILLAB_ROUTING_MIN_CHECKED", "0")
    st.cache_resource.clear()


def test_with_no_measurement_confident_prelabels_still_go_to_people(
        env: tuple[Workspace, Store]) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=4)
    for tid, _, _ in store.queues.assignments("ana"):
        save_prelabel(store, tid, "sql_logic_error", 0.99)
    at = open_page("ana")
    assert position(at).startswith("Item 1 of 4 · 0 labelled · 0 skipped")


def test_position_and_progress_count_only_work_for_people(
        env: tuple[Workspace, Store], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, store = env
    _trust_every_measured_labeller(monkeypatch)
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=4)
    assigned = [tid for tid, _, _ in store.queues.assignments("ana")]
    for tid in assigned[:2]:  # trusted: left to the labeller (no spot check of 2 at 10 %)
        save_prelabel(store, tid, "sql_logic_error", 0.97)
    at = open_page("ana")
    assert position(at).startswith("Item 1 of 2 · 0 labelled · 0 skipped")
    bars = [p.proto.text for p in at.get("progress")]
    assert any(t.startswith("ana: 0 of 2 labelled (2 more assigned need no label") for t in bars)
    first = current_item(at)
    assert first in assigned[2:]
    at.button(key="lf_cat_stuck_in_loop").click()
    at.run()
    assert position(at).startswith("Item 2 of 2 · 1 labelled · 0 skipped")
    second = current_item(at)
    assert second in assigned[2:] and second != first
    at.button(key="lf_skip").click()
    at.run()
    assert any("skipped 1 item" in i.value for i in at.info)
    assert any(p.proto.text.startswith("ana: 1 of 2 labelled") for p in at.get("progress"))


def test_undo_retracts_the_last_label_and_reopens_the_item(
        env: tuple[Workspace, Store]) -> None:
    ws, store = env
    create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=3)
    at = open_page("ana")
    first = current_item(at)
    at.button(key="lf_cat_sql_logic_error").click()
    at.run()
    assert current_item(at) != first
    assert position(at).startswith("Item 2 of 3 · 1 labelled")
    at.button(key="annotate_undo").click()
    at.run()
    # The item is back in the queue and opens first; the label no longer counts.
    assert current_item(at) == first
    assert position(at).startswith("Item 1 of 3 · 0 labelled")
    assert any("Undone" in i.value for i in at.info)
    assert store.labels.for_item(first, viewer=None, blind=False, include_llm=False) == []
    assert [lab.category for lab, _, _ in store.labels.retracted(first)] == ["sql_logic_error"]
    assert at.button(key="annotate_undo").disabled  # nothing else saved in this session
    at.button(key="lf_cat_answer_format_error").click()
    at.run()
    history = store.labels.for_item(first, viewer=None, blind=False, include_llm=False)
    assert [lab.category for lab in history] == ["answer_format_error"]
    assert position(at).startswith("Item 2 of 3 · 1 labelled")


def test_take_gives_items_that_need_a_person(env: tuple[Workspace, Store],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ws, store = env
    _trust_every_measured_labeller(monkeypatch)
    failed = [str(t) for t in failed_frame(ws)["id"]]
    for tid in failed[:10]:
        save_prelabel(store, tid, "sql_logic_error", 0.99)
    at = open_page("ben")
    at.button(key="annotate_take").click()
    at.run()
    assert not at.exception
    taken = [tid for tid, _, _ in store.queues.assignments("ben")]
    # Nine of the ten trusted items are left to the labeller; the tenth is the spot check
    # (10 %), handed out like any other item.
    assert len(taken) == 25 and len(set(taken) & set(failed[:10])) == 1
    assert position(at).startswith("Item 1 of 25 · 0 labelled · 0 skipped")


def test_without_an_ehr_the_page_says_so_once(env: tuple[Workspace, Store]) -> None:
    ws, store = env
    (ws.root / "ehr.duckdb").unlink()  # the demo's EHR: nothing to re-run SQL against
    # An item with SQL steps: both the steps' re-run box and the reference SQL would say it.
    with_sql = next(str(tid) for tid in failed_frame(ws)["id"]
                    if (traj := ws.get(str(tid))) is not None and sql_steps(traj.steps))
    store.queues.assign([str(with_sql)], ["ana"], overlap=1)
    at = open_page("ana")
    assert current_item(at) == with_sql
    notes = [c.value for c in at.caption if c.value.startswith("No EHR database configured")]
    assert len(notes) == 1, notes
    assert not [b for b in at.button if str(b.key).startswith("rerun_btn_")]


def test_a_key_the_store_could_not_save_brings_its_item_back_first(
        env: tuple[Workspace, Store], monkeypatch: pytest.MonkeyPatch) -> None:
    """The annotation file locked by another program (a real SQLite lock): the key is refused
    with one line, the same item stays, and once the lock is gone the key saves it. An item
    whose key failed comes back first whatever order the queue has by then."""
    import sqlite3

    from faillab.app.widgets.label_form import UNSAVED
    from labeling.store import engine as engine_module

    ws, store = env
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_S", 0.3)
    assert create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=3) == 3
    at = open_page("ana")
    first = current_item(at)
    other = sqlite3.connect(Settings.from_env().annotations_url().removeprefix("sqlite:///"),
                            isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        at.button(key="lf_cat_sql_logic_error").click()
        at.run()
        other.execute("ROLLBACK")
    finally:
        other.close()
    assert not at.exception
    assert current_item(at) == first
    assert any("your last key was not saved" in e.value for e in at.error)
    assert at.session_state[UNSAVED] == first
    assert store.labels.for_item(first, viewer=None, blind=False) == []
    # Whatever the queue puts first by then, the item whose key failed is shown first: here
    # the last item, as a failed save leaves the session; its key then saves and clears it.
    settings = Settings.from_env()
    waiting = queue_for(store, set(failed_frame(ws)["id"]), "ana",
                        prelabel_threshold=settings.prelabel_threshold,
                        spot_check_share=settings.spot_check_share)
    assert waiting[0] == first and len(waiting) == 3
    at.session_state[UNSAVED] = third = waiting[-1]
    at.run()
    assert current_item(at) == third
    at.button(key="lf_cat_sql_logic_error").click()
    at.run()
    [label] = store.labels.for_item(third, viewer=None, blind=False)
    assert label.category == "sql_logic_error"
    assert UNSAVED not in at.session_state and current_item(at) == first
    # Skipping the item puts it aside on purpose: it no longer comes back first.
    at.session_state[UNSAVED] = first
    at.button(key="lf_skip").click()
    at.run()
    assert UNSAVED not in at.session_state and current_item(at) != first


def test_a_new_session_opens_on_the_item_in_the_address(env: tuple[Workspace, Store]) -> None:
    """The item on screen is kept in the address: a new session (a replica restarted under
    the page, a reload) opens on it, not on whatever the queue puts first by then, and says
    that no label of the person's is on it yet. Once labelled, the address moves on."""
    ws, store = env
    assert create_assignments(store, ws, ["ana"], overlap=1, double_share=0.0, limit=3) == 3
    at = open_page("ana")
    first = current_item(at)
    assert at.query_params[ITEM_PARAM] == first
    settings = Settings.from_env()
    waiting = queue_for(store, set(failed_frame(ws)["id"]), "ana",
                        prelabel_threshold=settings.prelabel_threshold,
                        spot_check_share=settings.spot_check_share)
    last = waiting[-1]
    assert last != first
    # A new session whose address names the last item of the queue.
    again = open_page("ana", item=last)
    assert not again.exception, [e.value for e in again.exception]
    assert current_item(again) == last
    assert any("Back where you were" in i.value for i in again.info)
    again.button(key="lf_cat_sql_logic_error").click()
    again.run()
    assert store.labels.for_item(last, viewer=None, blind=False)[0].annotator == "ana"
    shown = current_item(again)
    assert shown != last and again.query_params[ITEM_PARAM] == shown
    assert not any("Back where you were" in i.value for i in again.info)
    # An address naming an item that is not in the person's queue changes nothing.
    third = open_page("ana", item=last)  # labelled now
    assert current_item(third) == waiting[0] and not any(
        "Back where you were" in i.value for i in third.info)
