"""The Agreement page counts the pre-labels people confirmed: a label made with `A` is a human
confirmation of that pre-label (the page once said "No item has both a human label and an LLM
pre-label yet" after an annotator had accepted five heuristic pre-labels)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.store import Store, open_store
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace
from tests.support import REPO

MAIN = str(REPO / "app" / "main.py")
VERSION = default_taxonomy().version


@pytest.fixture
def accepted(prelabelled_demo_workspace: Path, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """Five heuristic pre-labels accepted with the pre-label shown, one changed, two labelled
    with it hidden (one agreeing anyway)."""
    root = copy_of(prelabelled_demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    store = open_store(Settings.from_env().annotations_url())
    store.users.add("ana", "annotator")
    store.users.add("lea", "lead")
    items = sorted(store.prelabels.opinions(VERSION).items())[:8]
    for i, (tid, opinion) in enumerate(items):
        other = ("semantic_misunderstanding" if opinion.category == "answer_format_error"
                 else "answer_format_error")
        same = i < 5 or i == 6
        store.labels.add(tid, opinion.category if same else other, annotator="ana",
                         taxonomy_version=VERSION, prelabel_shown=i < 6)
    yield store
    store.close()
    st.cache_resource.clear()


def test_accepted_pre_labels_are_counted(accepted: Store) -> None:
    at = AppTest.from_file(MAIN, default_timeout=90)
    at.session_state["identity_name"] = "lea"
    at.run()
    at.switch_page("views/agreement.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "acceptance_rate" in d.value.columns)
    row = table.set_index("labeller").loc["heuristic"]
    assert (row["labels"], row["accepted"], row["changed"]) == (8, 5, 1)
    assert (row["blind_labels"], row["blind_agreed"]) == (2, 1)
    assert row["acceptance_rate"] == pytest.approx(5 / 6)
    assert not any("No item has both" in i.value for i in at.info)
