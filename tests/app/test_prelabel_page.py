"""The Pre-label page (Streamlit AppTest) on a copy of the demo workspace."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.store import open_store
from tests.support import REPO

PAGE = str(REPO / "app" / "views" / "prelabel.py")


@pytest.fixture
def ws_dir(demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[Path]:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    monkeypatch.setenv("FAILLAB_AUTH", "none")
    monkeypatch.delenv("FAILLAB_DATABASE_URL", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    # Settings, workspace and store are cached per process: start each test afresh.
    st.cache_resource.clear()
    st.cache_data.clear()
    yield root
    st.cache_resource.clear()
    st.cache_data.clear()


def signed_in(role: str) -> AppTest:
    # Roles are set through the store (as `faillab users role` does), never from the sidebar.
    store = open_store(Settings.from_env().annotations_url())
    store.users.ensure("lea", "annotator")
    store.users.set_role("lea", role)
    store.close()
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["identity_name"] = "lea"
    at.run()
    assert not at.exception, at.exception
    return at


def test_renders_and_warns_about_privacy_for_gemini(ws_dir: Path) -> None:
    at = signed_in("lead")
    assert at.title[0].value == "Pre-label"
    assert not at.warning  # heuristic: nothing leaves the machine
    start = at.button(key="prelabel_start")
    assert not start.disabled
    at.radio(key="prelabel_labeller").set_value("gemini").run()
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "PhysioNet" in warnings and "NOT zero-retention" in warnings
    # Gemini cannot be started until the notice is acknowledged.
    assert at.button(key="prelabel_start").disabled
    at.checkbox(key="prelabel_ack").check().run()
    assert not at.button(key="prelabel_start").disabled
    at.checkbox(key="prelabel_vertex").check().run()
    assert "Vertex AI" in " ".join(w.value for w in at.warning)


def test_annotators_may_watch_but_not_start(ws_dir: Path) -> None:
    at = signed_in("annotator")
    assert at.title[0].value == "Pre-label"
    assert at.button(key="prelabel_start").disabled
    assert any("Only leads and admins" in c.value for c in at.caption)


def test_start_launches_worker_and_run_finishes(ws_dir: Path) -> None:
    at = signed_in("lead")
    at.number_input(key="prelabel_limit").set_value(20).run()
    at.button(key="prelabel_start").click().run()
    assert not at.exception, at.exception
    run_id = at.session_state["prelabel_run_id"]

    store = open_store(f"sqlite:///{(ws_dir / 'annotations.sqlite').resolve()}")
    try:
        deadline = time.monotonic() + 120
        run = store.prelabels.get_run(run_id)
        while run is not None and run.status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            run = store.prelabels.get_run(run_id)
        assert run is not None and run.status == "done", (
            (ws_dir / "logs" / f"prelabel-run-{run_id}.log").read_text()
        )
        assert (run.labeller, run.labelled, run.calls) == ("heuristic", 20, 0)
        assert run.pid is not None
    finally:
        store.close()

    # The page shows the finished run and the distribution of the new pre-labels.
    at.run()
    assert not at.exception
    headers = [h.value for h in at.subheader]
    assert any(h.startswith(f"Run {run_id}: heuristic") and "done" in h for h in headers)
    assert any("20 of" in c.value and "pre-labelled" in c.value for c in at.caption)
    # Routing by measured trust: nothing measured yet, so every item goes to people, each
    # with its reason.
    labels = {m.label for m in at.metric}
    assert "No pre-label → people" in labels
    assert labels & {"Too few checked items → people", "Below the target → people"}
    assert "Left to the labeller" not in labels
    [reasons] = [d.value for d in at.dataframe if "why" in d.value.columns]
    assert set(reasons["goes to"]) == {"people"} and reasons["why"].str.len().min() > 0
