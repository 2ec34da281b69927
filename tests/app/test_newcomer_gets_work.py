"""Local mode: someone who types a new name gets work at once on Annotate (no lead's plan, no
button), as in the simplest annotation tools; a returning name is left as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.store import Store, open_store
from tests.app.support import copy_of, serve_workspace, shown_item
from tests.support import REPO

MAIN = str(REPO / "app" / "main.py")


@pytest.fixture
def store(demo_workspace: Path, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    root = copy_of(demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    found = open_store(Settings.from_env().annotations_url())
    found.users.add("ana", "annotator")
    yield found
    found.close()
    st.cache_resource.clear()


def _type_name(name: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    at.text_input(key="identity_input").input(name)
    next(b for b in at.button if b.label == "Use this name").click()
    at.run()
    at.switch_page("views/annotate.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_newcomer_typing_a_name_gets_an_item_at_once(store: Store) -> None:
    at = _type_name("newbie")
    assert len(store.queues.assignments("newbie")) > 0
    assert shown_item(at) in {tid for tid, _, _ in store.queues.assignments("newbie")}
    assert "Your queue is empty" not in " ".join(s.value for s in at.success)


def test_a_known_name_keeps_its_empty_queue(store: Store) -> None:
    at = _type_name("ana")
    assert store.queues.assignments("ana") == []
    assert "Your queue is empty" in " ".join(s.value for s in at.success)
