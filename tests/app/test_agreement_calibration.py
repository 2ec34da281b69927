"""The Agreement page's calibration section (AppTest): each labeller's calibration on the items
people checked, the same figures as `faillab stats labeller --calibration`, and its
reliability curve."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.store import Store, open_store
from opinions.learn.calibration_store import calibration_report, workspace_observations
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace
from tests.support import REPO

MAIN = str(REPO / "app" / "main.py")
VERSION = default_taxonomy().version


@pytest.fixture
def checked(prelabelled_demo_workspace: Path, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The pre-labelled demo with 12 failures checked by an annotator (the heuristic's
    category confirmed on two of three) and a lead to read the page."""
    root = copy_of(prelabelled_demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    store = open_store(Settings.from_env().annotations_url())
    store.users.add("ana", "annotator")
    store.users.add("lea", "lead")
    for i, (tid, opinion) in enumerate(sorted(store.prelabels.opinions(VERSION).items())[:12]):
        other = ("semantic_misunderstanding" if opinion.category == "answer_format_error"
                 else "answer_format_error")
        store.labels.add(tid, opinion.category if i % 3 else other, annotator="ana",
                         taxonomy_version=VERSION)
    yield store
    store.close()
    st.cache_resource.clear()


def test_the_page_shows_each_labellers_calibration_and_curve(checked: Store) -> None:
    at = AppTest.from_file(MAIN, default_timeout=90)
    at.session_state["identity_name"] = "lea"
    at.run()
    at.switch_page("views/agreement.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "ece_calibrated" in d.value.columns)
    rows = table.set_index(["labeller", "category"])
    assert rows.loc[("heuristic", "(all)"), "measured_on"] == "workspace"
    assert rows.loc[("heuristic", "(all)"), "checked"] == 12
    assert rows.loc[("heuristic", "(all)"), "agreement"] == pytest.approx(8 / 12)
    # The page's figures are the command line's: one computation in opinions.learn.
    summary, _ = calibration_report(workspace_observations(checked, VERSION))
    want = next(r for r in summary if (r["labeller"], r["category"]) == ("heuristic", "(all)"))
    assert rows.loc[("heuristic", "(all)"), "ece_raw"] == pytest.approx(want["ece_raw"])
    # Without the toggle the classifier shows where its prior was measured.
    assert rows.loc[("classifier", "(all)"), "measured_on"] == "development set"
    pick = at.selectbox(key="agreement_calibration_labeller")
    assert "heuristic" in pick.options
    at.toggle(key="agreement_calibration_classifier").set_value(True)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "ece_calibrated" in d.value.columns)
    rows = table.set_index(["labeller", "category"])
    assert rows.loc[("classifier", "(all)"), "measured_on"] == "workspace"
    assert rows.loc[("classifier", "(all)"), "checked"] == 12
