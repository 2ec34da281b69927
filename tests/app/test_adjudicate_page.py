"""Adjudicate page in-process (AppTest): refusal for annotators, a decision with a reason,
and optimistic locking against a concurrent decision by another lead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.queue import failed_frame
from labeling.store import Store, open_store
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord
from taxonomy import default_taxonomy
from tests.app.support import copy_of, serve_workspace
from tests.support import REPO, save_test_taxonomy
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")


@pytest.fixture
def disputed(demo_workspace: Path, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Store, str]]:
    """A store where two annotators disagree on one failed item."""
    root = copy_of(demo_workspace, tmp_path)
    serve_workspace(root, monkeypatch)
    store = open_store(Settings.from_env().annotations_url())
    save_test_taxonomy(store, ("v",))  # the disputed item's labels, kept apart from others
    for name, role in (("ana", "annotator"), ("ben", "annotator"), ("lea", "lead"),
                       ("max", "lead")):
        store.users.add(name, role)
    tid = str(failed_frame(Workspace(root))["id"].iloc[0])
    store.labels.add(tid, "sql_logic_error", annotator="ana", taxonomy_version="v",
                     note="ANA: wrong join")
    store.labels.add(tid, "semantic_misunderstanding", annotator="ben", taxonomy_version="v",
                     note="BEN: misread the question")
    yield store, tid
    store.close()
    st.cache_resource.clear()


def open_adjudicate(user: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.session_state["identity_name"] = user
    at.run()
    at.switch_page("views/adjudicate.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def submit(at: AppTest, tid: str, category: str, reason: str) -> None:
    at.selectbox(key=f"adj_{tid}_category").set_value(category)
    at.text_input(key=f"adj_{tid}_reason").input(reason)
    at.button[[b.label for b in at.button].index("Save decision")].click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def test_annotator_is_refused(disputed: tuple[Store, str]) -> None:
    at = open_adjudicate("ana")
    assert any("signed in as annotator" in e.value for e in at.error)
    assert not [s for s in at.selectbox if s.key == "adj_item"]  # the page stopped
    assert "BEN: misread" not in " ".join(m.value for m in at.markdown)


def test_lead_adjudicates_with_reason(disputed: tuple[Store, str]) -> None:
    store, tid = disputed
    at = open_adjudicate("lea")
    shown = " ".join([m.value for m in at.markdown] + [c.value for c in at.caption])
    assert "ANA: wrong join" in shown.replace("\\", "")
    assert "BEN: misread the question" in shown.replace("\\", "")
    # The pre-label columns are named for what they are, whichever labeller made them.
    columns = list(next(d.value for d in at.dataframe if "why" in d.value.columns).columns)
    assert "why" in columns and "pre-label" in columns and "LLM" not in columns
    # No reason: refused, nothing stored.
    at.button[[b.label for b in at.button].index("Save decision")].click()
    at.run()
    assert any("needs a reason" in e.value for e in at.error)
    assert store.adjudications.get(tid) is None
    submit(at, tid, "sql_logic_error", "rubric rule: the join is the first wrong step")
    decision = store.adjudications.get(tid)
    assert decision is not None
    assert (decision.category, decision.decided_by, decision.version) == (
        "sql_logic_error", "lea", 1)
    assert decision.reason == "rubric rule: the join is the first wrong step"
    assert any("version 1" in s.value for s in at.success)
    actions = [(h.entity, h.action) for h in store.history.entries(entity_id=tid)]
    assert ("adjudication", "create") in actions
    history = next(d.value for d in at.dataframe if "by" in d.value.columns)
    cells = history.astype(str).to_numpy().ravel().tolist()
    assert "None" not in cells and "nan" not in cells
    assert "lea" in set(history["by"])
    tax = default_taxonomy()
    assert tax.category("sql_logic_error").name in set(history["category"])  # a display name
    # A second decision by the same lead in the same session uses the version it saved
    # (decided items leave the list unless asked for).
    at.toggle(key="adj_include_done").set_value(True)
    at.run()
    submit(at, tid, "semantic_misunderstanding", "on reflection the question was misread")
    decision = store.adjudications.get(tid)
    assert decision is not None and decision.version == 2


def test_stale_version_is_a_conflict_not_an_overwrite(disputed: tuple[Store, str]) -> None:
    store, tid = disputed
    at = open_adjudicate("lea")  # lea is shown "no decision yet"
    store.adjudications.decide(tid, "semantic_misunderstanding", "decided first", "max",
                               expected_version=None)
    submit(at, tid, "sql_logic_error", "my reason")
    assert any("changed by max" in e.value and "reload" in e.value for e in at.error)
    decision = store.adjudications.get(tid)
    assert decision is not None
    assert (decision.decided_by, decision.category, decision.version) == (
        "max", "semantic_misunderstanding", 1)
    # Reload shows max's decision; deciding again now succeeds on top of it.
    at.button(key=f"adj_{tid}_reload").click()
    at.run()
    at.toggle(key="adj_include_done").set_value(True)
    at.run()
    submit(at, tid, "sql_logic_error", "overruling after reading max's reason")
    decision = store.adjudications.get(tid)
    assert decision is not None and (decision.decided_by, decision.version) == ("lea", 2)


def test_agreement_page_for_leads(disputed: tuple[Store, str]) -> None:
    store, _ = disputed
    version = default_taxonomy().version
    store.users.add("cai", "annotator")
    items = [f"item-{i}" for i in range(6)]
    cats = ["sql_logic_error", "stuck_in_loop", "answer_format_error"]
    for i, item in enumerate(items):
        for j, who in enumerate(("ana", "ben", "cai")):
            # ana and ben pick the same step on even items; cai never chooses one.
            step = None if who == "cai" else (2 if who == "ana" or i % 2 == 0 else 5)
            store.labels.add(item, cats[(i + (j == 2 and i % 2)) % 3], annotator=who,
                             taxonomy_version=version, prelabel_shown=j == 0 and i < 3,
                             first_error_step=step)
        store.prelabels.save(PrelabelRecord(PrelabelKey(item, version, "p", "m"), LabelResult(
            cats[i % 3], 0.9, None, "because", "heuristic", "1")))
    refused = open_adjudicate("ana")
    refused.switch_page("views/agreement.py")
    refused.run()
    assert any("signed in as annotator" in e.value for e in refused.error)
    at = open_adjudicate("lea")
    at.switch_page("views/agreement.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    pairs = at.dataframe[0].value
    assert set(zip(pairs["rater_a"], pairs["rater_b"], strict=True)) == {
        ("ana", "ben"), ("ana", "cai"), ("ben", "cai")}
    kappa = pairs.set_index(["rater_a", "rater_b"]).loc[("ana", "ben"), "kappa"]
    assert float(cast(float, kappa)) == 1.0
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Fleiss' kappa"] != "—"
    assert metrics["Krippendorff's alpha (nominal)"] != "—"
    # Six ana/ben pairs with chosen steps, three agreeing; cai's six step-less labels left out.
    assert metrics["Pairs compared"] == "6"
    assert metrics["Step agreement (exact)"] == "50.0%"
    assert metrics["Labels left out"] == "6"
    # all / pre-label shown (items 0-2: ana saw it) / pre-label hidden (items 3-5: nobody did)
    assert len(at.tabs) == 3


def test_decision_moves_on_to_the_next_open_item_and_shows_steps(
        disputed: tuple[Store, str]) -> None:
    store, first = disputed
    ws = Workspace(Settings.from_env().workspace)
    second = str(failed_frame(ws)["id"].iloc[1])
    store.labels.add(second, "sql_logic_error", annotator="ana", taxonomy_version="v")
    store.labels.add(second, "stuck_in_loop", annotator="ben", taxonomy_version="v")
    at = open_adjudicate("lea")
    assert at.selectbox(key="adj_item").value == first
    traj = ws.get(first)
    assert traj is not None
    assert any(e.label == f"Steps ({len(traj.steps)})" for e in at.expander)
    submit(at, first, "sql_logic_error", "rule 2: the join comes first")
    assert store.adjudications.get(first) is not None
    assert at.selectbox(key="adj_item").value == second
    assert any("Showing the next open item" in s.value for s in at.success)
    submit(at, second, "stuck_in_loop", "rule 5: it repeats the same query")
    assert any("No open disagreement is left" in s.value for s in at.success)


def test_a_rater_is_taken_by_key_into_the_decision(disputed: tuple[Store, str]) -> None:
    """1, 2, ... take a rater's label (category, secondary, step) into the form; O clears it."""
    store, tid = disputed
    store.labels.add(tid, "semantic_misunderstanding", annotator="ben", taxonomy_version="v",
                     secondary_category="sql_logic_error", first_error_step=1,
                     note="BEN: misread the question")
    at = open_adjudicate("lea")
    takes = {b.key: b for b in at.button if str(b.key).startswith("adj_take_")}
    assert sorted(str(k) for k in takes) == ["adj_take_0", "adj_take_1", "adj_take_other"]
    at.button(key="adj_take_1").click().run()  # rater B: ben
    assert at.selectbox(key=f"adj_{tid}_category").value == "semantic_misunderstanding"
    assert at.selectbox(key=f"adj_{tid}_secondary").value == "sql_logic_error"
    assert at.selectbox(key=f"adj_{tid}_step").value == 1
    assert any("Taken from Rater B: ben" in c.value.replace("\\", "") for c in at.caption)
    # None of them: the category is the lead's to choose, and saving without one is refused.
    at.button(key="adj_take_other").click().run()
    assert at.selectbox(key=f"adj_{tid}_category").value is None
    at.text_input(key=f"adj_{tid}_reason").input("neither is right")
    at.button[[b.label for b in at.button].index("Save decision")].click().run()
    assert any("Choose the final category" in e.value for e in at.error)
    assert store.adjudications.get(tid) is None
    at.button(key="adj_take_1").click().run()
    at.text_input(key=f"adj_{tid}_reason").input("ben read the rubric right")
    at.button[[b.label for b in at.button].index("Save decision")].click().run()
    decision = store.adjudications.get(tid)
    assert decision is not None
    assert (decision.category, decision.secondary_category, decision.first_error_step) == (
        "semantic_misunderstanding", "sql_logic_error", 1)
