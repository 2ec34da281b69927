"""One truth of "did it fail": a lead's verdict, given both ways, reaches every reader.

A run of three trajectories: one the producer recorded as a success, one it recorded as a
failure, one with no recorded verdict that the judge calls correct. A lead then says the
first failed and the second was right. Every reader of an outcome (the command line's
summary, list, show, statistics, pre-labelling, evidence and clusters; the audit pool; the
Overview, Browse, Trajectory, Annotate and Pre-label pages) must answer with the same single
failure, on the SQLite store and on PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
import streamlit as st
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from faillab.cli import main
from faillab_core.settings import Settings
from labeling.audit import candidate_pool
from labeling.queue import take_unassigned
from labeling.store import Store, open_store
from tests.app.support import serve_workspace
from tests.support import REPO, make_trajectory, postgres_database
from trajectories.model import Outcome, Task
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")


def _task(tid: str) -> Task:
    return Task(id=tid, question=f"How many patients are female ({tid})?",
                reference_sql="SELECT count(*) FROM patients WHERE gender = 'F'",
                ground_truth=[[52]], answer_format="a single number")


def _run_file(path: Path) -> Path:
    recorded_right = make_trajectory(task=_task("right"), final_answer=52,
                                     outcome=Outcome(success=True, reward=1.0))
    recorded_wrong = make_trajectory(task=_task("wrong"), final_answer=7,
                                     outcome=Outcome(success=False, reward=0.0))
    judged_right = make_trajectory(task=_task("judged"), final_answer=52, outcome=None)
    path.write_text("".join(t.model_dump_json() + "\n"
                            for t in (recorded_right, recorded_wrong, judged_right)))
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def team(request: pytest.FixtureRequest, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Store, dict[str, str]]]:
    """A workspace with the run imported, its store (SQLite or PostgreSQL) with a lead, and
    the run's ids by task."""
    root = tmp_path / "ws"
    serve_workspace(root, monkeypatch)
    with postgres_database("faillab_outcome") if request.param == "postgresql" \
            else nullcontext("") as url:
        if url:
            monkeypatch.setenv("FAILLAB_DATABASE_URL", url)
        source = _run_file(tmp_path / "run.jsonl")
        code, _out, err = _cli("import", str(source), "--workspace", str(root), "--json")
        assert code == 0, err
        store = open_store(Settings.from_env().annotations_url())
        store.users.add("lea", "lead")
        store.users.add("ana", "annotator")
        ids = {row["task_id"]: row["id"] for row in Workspace(root).list()}
        try:
            yield root, source, store, ids
        finally:
            store.close()
            st.cache_resource.clear()
            st.cache_data.clear()


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _json(*args: str) -> object:
    code, out, err = _cli(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def _page(page: str, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.session_state["identity_name"] = "lea"
    at.run()
    if query:
        at.query_params.update(query)
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _failures_everywhere(root: Path, source: Path, store: Store) -> dict[str, object]:
    """What each reader says failed (a set of task ids, or a count)."""
    ws = Workspace(root)
    by_id = {row["id"]: row["task_id"] for row in ws.list()}
    where = ("--workspace", str(root))
    seen: dict[str, object] = {}
    summary = _json("summary", *where)
    assert isinstance(summary, dict)
    seen["summary"] = summary["failed"]
    listed = _json("list", "--failed", *where)
    assert isinstance(listed, list)
    seen["list"] = {r["task_id"] for r in listed}
    shown: set[str] = set()
    for tid, task in by_id.items():
        code, out, _ = _cli("show", tid, *where)
        assert code == 0
        if "OUTCOME FAILURE" in out.splitlines():
            shown.add(task)
    seen["show"] = shown
    code, out, err = _cli("stats", "success", *where, "--format", "json")
    assert code == 0, err
    success = json.loads(out)[0]
    seen["stats"] = round((1 - success["overall"]) * success["n"])
    code, out, err = _cli("evidence", str(source), *where, "--no-exec", "--json")
    assert code == 0, err
    seen["evidence"] = {json.loads(line)["task"] for line in out.splitlines() if line}
    clusters = _json("clusters", "--embedder", "tfidf", *where)
    assert isinstance(clusters, dict)
    seen["clusters"] = {by_id[m] for c in clusters["clusters"] for m in c["members"]}
    seen["audit pool"] = {c.task_id for c in
                          candidate_pool(ws, verdicts=store.verdicts.effective()).candidates}
    # Pages, as the lead sees them.
    overview = _page("views/overview.py")
    metrics = {m.label: m.value for m in overview.metric}
    seen["Overview"] = int(metrics["Failures"].replace(",", ""))
    browse = _page("views/browse.py")
    browse.segmented_control(key="browse_outcome").set_value("failed").run()
    seen["Browse"] = set(browse.dataframe[0].value["task_id"])
    trajectory: set[str] = set()
    for tid, task in by_id.items():
        page = _page("views/trajectory.py", {"id": tid})
        caption = next(c.value for c in page.caption if "outcome:" in c.value)
        if re.search(r"outcome: \*\*failure\*\*", caption):
            trajectory.add(task)
    seen["Trajectory"] = trajectory
    prelabel = _page("views/prelabel.py")
    seen["Pre-label page"] = len([i for i in prelabel.info
                                  if "no failed trajectories" in i.value]) == 0
    # Annotate's pool: what a person can take, and what pre-labelling would label.
    seen["take"] = take_unassigned(store, ws, "lea", 10)
    seen["Annotate queue"] = {by_id[t] for t in store.queues.next_items("lea")}
    code, out, err = _cli("prelabel", *where, "--labeler", "heuristic", "--json")
    assert code == 0, err
    seen["prelabel"] = json.loads(out)["labelled"]
    return seen


@pytest.mark.postgres
def test_a_leads_verdict_both_ways_reaches_every_reader(
        team: tuple[Path, Path, Store, dict[str, str]]) -> None:
    root, source, store, ids = team
    before = Workspace(root).summary()
    assert before["failed"] == 1  # the recorded failure, before anyone said anything
    store.verdicts.record(ids["right"], "incorrect", "lea", note="the count is of admissions")
    store.verdicts.record(ids["wrong"], "correct", "lea", note="7 is right for this cohort")
    seen = _failures_everywhere(root, source, store)
    one = {"right"}
    assert seen == {
        "summary": 1, "list": one, "show": one, "stats": 1, "evidence": one,
        "clusters": one, "audit pool": one, "Overview": 1, "Browse": one,
        "Trajectory": one, "Pre-label page": True, "take": 1, "Annotate queue": one,
        "prelabel": 1,
    }


@pytest.mark.postgres
def test_an_annotators_verdict_moves_only_their_own_queue(
        team: tuple[Path, Path, Store, dict[str, str]]) -> None:
    """Blind rules as before: a colleague's verdict never moves another person's item, a
    lead's moves everyone's."""
    root, _source, store, ids = team
    ws = Workspace(root)
    store.users.add("ben", "annotator")
    store.verdicts.record(ids["wrong"], "correct", "ana")
    assert take_unassigned(store, ws, "ana", 10) == 0  # right, by her own verdict
    assert take_unassigned(store, ws, "ben", 10) == 1  # still a failure for him
    store.verdicts.record(ids["judged"], "incorrect", "lea")
    assert take_unassigned(store, ws, "ana", 10) == 1  # a lead's verdict reaches her
    assert store.queues.next_items("ana") == [ids["judged"]]
