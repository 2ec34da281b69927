"""Undo reopens the item as the label had it: the first faulty step marked with the cursor on
it, the secondary category and the note back in the form (it used to reopen with the step
reset, so the step was lost unless found again)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab.app.state import load_trajectory
from faillab.app.widgets.label_form import is_agent_step
from faillab_core.settings import Settings
from labeling.queue import create_assignments
from labeling.store import Store, open_store
from tests.app.support import copy_of, serve_workspace, shown_item
from tests.support import REPO
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")


@pytest.fixture
def store(demo_workspace: Path, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    root = copy_of(demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    found = open_store(Settings.from_env().annotations_url())
    found.users.add("ana", "annotator")
    create_assignments(found, Workspace(root), ["ana"], overlap=1, double_share=0.0, limit=3)
    yield found
    found.close()
    st.cache_resource.clear()


def test_undo_brings_back_the_step_secondary_and_note(store: Store) -> None:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.session_state["identity_name"] = "ana"
    at.run()
    at.switch_page("views/annotate.py")
    at.run()
    first = shown_item(at)
    traj = load_trajectory(first)
    assert traj is not None
    step = max(i for i, s in enumerate(traj.steps) if is_agent_step(s))
    [picker] = [b for b in at.selectbox if str(b.key).startswith("lf_step_pick_")]
    picker.set_value(step).run()
    at.selectbox(key="lf_secondary").set_value("answer_format_error")
    at.text_area(key="lf_note").input("joined the wrong table")
    at.button(key="lf_cat_sql_logic_error").click()
    at.run()
    assert shown_item(at) != first
    at.button(key="annotate_undo").click()
    at.run()
    assert not at.exception
    assert shown_item(at) == first
    assert at.session_state["lf_step"] == step and at.session_state["lf_cursor"] == step
    assert at.selectbox(key="lf_secondary").value == "answer_format_error"
    assert at.text_area(key="lf_note").value == "joined the wrong table"
    # One key saves it again, step and all.
    at.button(key="lf_cat_semantic_misunderstanding").click()
    at.run()
    [label] = store.labels.for_item(first, viewer=None, blind=False, include_llm=False)
    assert (label.category, label.first_error_step, label.secondary_category, label.note) == (
        "semantic_misunderstanding", step, "answer_format_error", "joined the wrong table")
