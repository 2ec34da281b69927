"""Validity-audit pages in-process (AppTest) on the demo workspace: blind review with progress,
adjudication with optimistic locking, and the report."""

from __future__ import annotations

import html
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.audit import candidate_pool, create_audit, plan_audit
from labeling.store import Store, open_store
from tests.support import REPO
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")
RUNS = ["sim-small/t0.0", "sim-kimi-like/t0.0"]


@pytest.fixture
def env(demo_workspace: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workspace, Store, list[str]]]:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    for var in ("FAILLAB_DATABASE_URL", "FAILLAB_AUTH", "FAILLAB_BLIND"):
        monkeypatch.delenv(var, raising=False)
    st.cache_resource.clear()  # settings, workspace and store are cached per process
    st.cache_data.clear()
    ws = Workspace(root)
    store = open_store(Settings.from_env().annotations_url())
    store.users.add("lea", "lead")
    store.users.add("max", "lead")
    store.users.add("ana")
    store.users.add("ben")
    plan = plan_audit(candidate_pool(ws, RUNS), n=6, seed=0)
    create_audit(store, plan, name="demo-audit", annotators=["ana", "ben"])
    yield ws, store, [c.task_id for c in plan.items]
    store.close()
    st.cache_resource.clear()


def open_page(user: str, page: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.session_state["identity_name"] = user
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [str(d.value) for d in at.dataframe] + [html.unescape(h.value) for h in at.html]
    parts += [e.value for e in at.error] + [i.value for i in at.info]
    parts += [t.value or "" for t in at.text_area]
    # Untrusted text is shown Markdown-escaped; drop the escapes to compare with the data.
    return "\n".join(str(p) for p in parts).replace("\\", "")


def test_review_is_blind_and_advances(env: tuple[Workspace, Store, list[str]]) -> None:
    _, store, tids = env
    store.audits.record_judgment("demo-audit", tids[0], "ben", False, reason="cohort_unit",
                                 note="BEN-SECRET-NOTE")
    at = open_page("ana", "views/audit_review.py")
    shown = texts(at)
    assert "Task 1 of 6" in shown
    assert "BEN-SECRET-NOTE" not in shown and "ben" not in shown
    # Blind to models: no run name, and the reference SQL was re-run in the sandbox.
    assert "sim-" not in shown
    assert any("re-run now" in m.value for m in at.markdown)
    assert at.get("progress")[0].proto.text.startswith("Your progress: 0 of 6")

    key = f"demo-audit_{tids[0]}"
    at.text_area(key=f"audit_note_{key}").input("ana thinks it is fine")
    at.button(key=f"audit_valid_{key}").click()
    at.run()
    assert not at.exception
    [mine] = [j for j in store.audits.judgments("demo-audit") if j.annotator == "ana"]
    assert (mine.task_id, mine.valid, mine.note) == (tids[0], True, "ana thinks it is fine")
    assert "Task 2 of 6" in texts(at)
    assert at.get("progress")[0].proto.text.startswith("Your progress: 1 of 6")

    # Invalid needs a reason code.
    key2 = f"demo-audit_{tids[1]}"
    at.button(key=f"audit_invalid_{key2}").click()
    at.run()
    assert "Pick a reason code" in texts(at)
    at.selectbox(key=f"audit_reason_{key2}").set_value("answer_format")
    at.button(key=f"audit_invalid_{key2}").click()
    at.run()
    judged = {j.task_id: j for j in store.audits.judgments("demo-audit") if j.annotator == "ana"}
    assert judged[tids[1]].valid is False and judged[tids[1]].reason == "answer_format"

    # Going back shows ana's own saved judgment, still not ben's.
    at.button(key="audit_review_prev").click()
    at.run()
    at.button(key="audit_review_prev").click()
    at.run()
    shown = texts(at)
    assert "Task 1 of 6" in shown and "Saved: valid" in shown
    assert "ana thinks it is fine" in shown and "BEN-SECRET-NOTE" not in shown


def test_adjudication_with_optimistic_locking(env: tuple[Workspace, Store, list[str]]) -> None:
    _, store, tids = env
    store.audits.record_judgment("demo-audit", tids[2], "ana", True, note="ANA-NOTE")
    store.audits.record_judgment("demo-audit", tids[2], "ben", False, reason="code_granularity",
                                 note="BEN-NOTE")
    store.audits.record_judgment("demo-audit", tids[3], "ana", True)
    store.audits.record_judgment("demo-audit", tids[3], "ben", True)

    denied = open_page("ana", "views/audit_adjudicate.py")
    assert any("for leads or admins" in e.value for e in denied.error)

    at = open_page("lea", "views/audit_adjudicate.py")
    assert at.selectbox(key="audit_adj_task").options == [f"{tids[2]} (open)"]
    shown = texts(at)
    assert "ANA-NOTE" in shown and "BEN-NOTE" in shown and "Medical-code granularity" in shown
    key = f"demo-audit_{tids[2]}"
    # The rule is said before saving: valid needs no reason, ben's invalid carries its own.
    assert "V valid: no reason needed" in shown and "B take ben's invalid" in shown
    at.button(key=f"audit_adj_take_B_{key}").click()
    at.run()
    assert not at.exception
    [verdict] = store.audits.adjudications("demo-audit")
    assert (verdict.valid, verdict.reason, verdict.decided_by, verdict.version) == (
        False, "code_granularity", "lea", 1)

    # A second lead changes it meanwhile; lea's next save is refused, not silently applied.
    store.audits.decide("demo-audit", tids[2], "max", valid=True, reason="other",
                        expected_version=1)
    at.toggle(key="audit_adj_only_open").set_value(False)
    at.run()
    at.button(key=f"audit_adj_valid_{key}").click()
    at.run()
    assert any("changed by max" in e.value for e in at.error)
    assert store.audits.adjudications("demo-audit")[0].version == 2
    at.button(key=f"audit_adj_reload_{key}").click()
    at.run()
    # Valid in one key, no reason asked: the concern it overrules is kept as the reason.
    at.button(key=f"audit_adj_valid_{key}").click()
    at.run()
    assert not at.error
    [verdict] = store.audits.adjudications("demo-audit")
    assert (verdict.valid, verdict.reason, verdict.decided_by, verdict.version) == (
        True, "code_granularity", "lea", 3)


def test_an_invalid_verdict_without_a_known_reason_asks_before_saving(
        env: tuple[Workspace, Store, list[str]]) -> None:
    _, store, tids = env
    store.audits.record_judgment("demo-audit", tids[1], "ana", True)
    store.audits.record_judgment("demo-audit", tids[1], "ben", False)  # no reason given
    at = open_page("lea", "views/audit_adjudicate.py")
    key = f"demo-audit_{tids[1]}"
    assert "I invalid: needs a reason code" in texts(at)
    at.button(key=f"audit_adj_invalid_{key}").click()
    at.run()
    assert any("needs a reason code" in e.value for e in at.error)
    assert store.audits.adjudications("demo-audit") == []
    at.button(key=f"audit_adj_code_{key}_cohort_unit").click()  # the key 2
    at.run()
    [verdict] = store.audits.adjudications("demo-audit")
    assert (verdict.valid, verdict.reason) == (False, "cohort_unit")


def test_report_page(env: tuple[Workspace, Store, list[str]]) -> None:
    _, store, tids = env
    for k, tid in enumerate(tids):
        store.audits.record_judgment("demo-audit", tid, "ana", True)
        store.audits.record_judgment("demo-audit", tid, "ben", k != 0, reason="temporal_wording")
    store.audits.decide("demo-audit", tids[0], "lea", valid=True, reason="other",
                        expected_version=None)
    denied = open_page("ana", "views/audit_report.py")
    assert any("for leads or admins" in e.value for e in denied.error)
    at = open_page("lea", "views/audit_report.py")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Audited tasks"] == "6"
    assert metrics["Valid after adjudication"] == "100.0%"
    assert metrics["Raw agreement"] == "83.3%"
    frames = {tuple(d.value.columns): d.value for d in at.dataframe}
    summary = frames[("metric", "value", "count")]
    assert "Candidate tasks" in set(summary["metric"])
    assert "Raw annotator agreement" in set(summary["metric"])
    assert "Borderline temporal wording" in set(frames[("reason", "tasks")]["reason"])
    assert "chance" in texts(at)  # the plain-language kappa explanation
    assert len(at.get("download_button")) == 4


def test_report_headline_names_open_disagreements_and_leads_archive(
        env: tuple[Workspace, Store, list[str]]) -> None:
    ws, store, tids = env
    for k, tid in enumerate(tids):
        store.audits.record_judgment("demo-audit", tid, "ana", True)
        store.audits.record_judgment("demo-audit", tid, "ben", k > 1, reason="temporal_wording")
    at = open_page("lea", "views/audit_report.py")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Valid after adjudication"] == "2 open"  # never "100.0%" with two undecided
    assert metrics["Open disagreements"] == "2"
    assert any("2 disagreements still open" in w.value for w in at.warning)
    for frame in at.dataframe:  # one number format: no None or NaN cells anywhere
        cells = frame.value.astype(str).to_numpy().ravel().tolist()
        assert not {"None", "nan", "<NA>"} & set(cells), frame.value

    # A second, mistaken audit becomes the default; archiving it hands the default back.
    plan = plan_audit(candidate_pool(ws, RUNS), n=2, seed=1)
    create_audit(store, plan, name="mistake", annotators=["ana", "ben"])
    at = open_page("lea", "views/audit_report.py")
    assert at.selectbox(key="audit_report_audit").value == "mistake"
    at.button(key="audit_archive").click()
    at.run()
    assert not at.exception
    assert set(store.audits.archived()) == {"mistake"}
    fresh = open_page("lea", "views/audit_review.py")
    assert fresh.selectbox(key="audit_review_audit").value == "demo-audit"
    assert fresh.selectbox(key="audit_review_audit").options == ["demo-audit", "mistake (archived)"]


def test_pages_without_an_audit(env: tuple[Workspace, Store, list[str]],
                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    shutil.copytree(env[0].root, empty, ignore=shutil.ignore_patterns("annotations.sqlite*"))
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(empty))
    st.cache_resource.clear()
    open_store(Settings.from_env().annotations_url()).users.add("lea", "lead")
    for page in ("views/audit_review.py", "views/audit_adjudicate.py", "views/audit_report.py"):
        at = open_page("lea", page)
        assert any("No audit yet" in i.value for i in at.info), page


def _reading_order(node: object) -> list[str]:
    """The main area's markdown and headings in the order they are drawn."""
    out: list[str] = []
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for _, child in sorted(children.items()):
            out += _reading_order(child)
    elif getattr(node, "type", None) in ("markdown", "subheader", "heading"):
        out.append(str(getattr(node, "value", "")))
    return out


def test_review_reads_before_it_judges_and_nothing_is_pre_styled(
        env: tuple[Workspace, Store, list[str]]) -> None:
    _, _, tids = env
    at = open_page("ana", "views/audit_review.py")
    order = _reading_order(at.main)
    sql_at = next(i for i, text in enumerate(order) if "Reference SQL" in text)
    judge_at = next(i for i, text in enumerate(order) if "Your judgment" in text)
    assert sql_at < judge_at, order
    key = f"demo-audit_{tids[0]}"
    valid, invalid = at.button(key=f"audit_valid_{key}"), at.button(key=f"audit_invalid_{key}")
    assert (valid.proto.type, invalid.proto.type) == ("secondary", "secondary")

    valid.click()
    at.run()
    at.button(key="audit_review_prev").click()
    at.run()
    # Once judged, the saved judgment is the one drawn as chosen.
    assert at.button(key=f"audit_valid_{key}").proto.type == "primary"
    assert at.button(key=f"audit_invalid_{key}").proto.type == "secondary"
