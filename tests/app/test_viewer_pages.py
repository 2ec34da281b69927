"""AppTest runs of the viewer pages on the demo workspace (the real page scripts, in-process)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.support import answer_panel, verdicts
from tests.support import REPO
from trajectories.model import StepKind
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")


@pytest.fixture
def app(demo_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(demo_workspace))
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def test_overview_shows_counts(app: AppTest, demo_workspace: Path) -> None:
    summary = Workspace(demo_workspace).summary()
    values = [m.value for m in app.metric]
    assert f"{summary['trajectories']:,}" in values
    assert f"{summary['failed']:,}" in values
    assert len(app.dataframe) == 2  # by run/model and by intent x scope
    runs = app.dataframe[0].value
    assert set(runs["run"]) == set(Workspace(demo_workspace).frame()["run"])


def test_browse_filters_push_down(app: AppTest, demo_workspace: Path) -> None:
    app.switch_page("views/browse.py").run()
    assert not app.exception
    frame = Workspace(demo_workspace).frame()
    app.segmented_control(key="browse_outcome").set_value("failed").run()
    shown = app.dataframe[0].value
    assert len(shown) == min(100, int((~frame["success"]).sum()))  # one page
    assert set(shown["outcome"]) == {"failure"}
    intent = sorted(frame["intent"].unique())[0]
    app.multiselect(key="browse_intents").set_value([intent]).run()
    shown = app.dataframe[0].value
    assert set(shown["intent"]) == {intent}
    expected = int(((~frame["success"]) & (frame["intent"] == intent)).sum())
    assert any(f"{expected:,} trajectories match" in c.value for c in app.caption)


def test_browse_sorts_and_pages_over_the_whole_set(app: AppTest, demo_workspace: Path) -> None:
    app.switch_page("views/browse.py").run()
    frame = Workspace(demo_workspace).frame()
    app.selectbox(key="browse_sort").set_value("n_errors").run()
    app.toggle(key="browse_desc").set_value(True).run()
    errors = sorted(frame["n_errors"].astype(int), reverse=True)
    assert list(app.dataframe[0].value["n_errors"]) == errors[:100]
    app.button(key="browse_next").click().run()
    assert not app.exception
    assert list(app.dataframe[0].value["n_errors"]) == errors[100:200]
    assert any("rows 101–200" in c.value for c in app.caption)
    app.segmented_control(key="browse_outcome").set_value("unscored").run()
    unscored = int(frame["success"].isna().sum())
    assert any(f"{unscored:,} trajectories match" in c.value for c in app.caption)


def test_trajectory_page_renders_steps_and_answer(app: AppTest, demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    # A failure with SQL steps (some failures of the demo answer without running any).
    trajs = [ws.get(row["id"]) for row in ws.list(failed=True, limit=50)]
    traj = next(t for t in trajs if t and any(s.kind == StepKind.SQL for s in t.steps))
    failed = str(traj.id)
    app.switch_page("views/trajectory.py")
    app.query_params["id"] = failed
    app.run()
    assert not app.exception
    # The steps and the reference SQL are drawn as escaped HTML blocks.
    blocks = "".join(h.value for h in app.html)
    assert f'Reference SQL</div><pre class="faillab-code" data-language="sql">' \
        f"{html.escape(traj.task.reference_sql or '')}</pre>" in blocks
    assert not app.code  # no highlighted code block (its script costs every page load)
    sql_steps = [s.code or "" for s in traj.steps if s.kind == StepKind.SQL]
    assert sql_steps and all(html.escape(sql) in blocks for sql in sql_steps)
    assert verdicts(answer_panel(app))["Exact match"] == "wrong"  # a failure


def test_step_rerun_buttons_are_built_only_in_the_opened_box(app: AppTest,
                                                           demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    failed, sql = "", []
    for row in ws.list(failed=True):  # a failure with SQL steps
        traj = ws.get(row["id"])
        assert traj is not None
        failed, sql = str(traj.id), [i for i, s in enumerate(traj.steps)
                                     if s.kind == StepKind.SQL]
        if sql:
            break
    assert sql
    app.switch_page("views/trajectory.py")
    app.query_params["id"] = failed
    app.run()
    prefix = f"rerun_btn_{failed}_"
    steps_buttons = [b for b in app.button if b.key and b.key.startswith(prefix)
                     and not b.key.endswith("_reference")]
    assert steps_buttons == []  # closed: no step button drawn
    box = [e for e in app.expander if e.label.startswith("Re-run a step's SQL")]
    assert [e.label for e in box] == [f"Re-run a step's SQL ({len(sql)} SQL steps)"]
    app.session_state[f"rerun_steps_{failed}"] = True
    app.run()
    keys = {b.key for b in app.button if b.key and b.key.startswith(prefix)}
    assert {f"{prefix}{i}" for i in sql} <= keys  # open: one per SQL step
    app.button(key=f"{prefix}{sql[-1]}").click().run()
    assert not app.exception
    # The result names its step (Markdown-escaped in the caption: a backslash before each paren).
    shown = [c.value for c in app.caption] + [e.value for e in app.error]
    assert any(f"(step {sql[-1]})" in v.replace("\\", "") for v in shown), shown


def test_trajectory_page_reruns_sql_in_sandbox(app: AppTest, demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    failed = ws.list(failed=True)[0]["id"]
    app.switch_page("views/trajectory.py")
    app.query_params["id"] = failed
    app.run()
    app.button(key=f"rerun_btn_{failed}_reference").click().run()
    assert not app.exception
    assert any("Re-run against ehr.duckdb" in c.value for c in app.caption)


def test_unknown_trajectory_id_is_a_clear_error(app: AppTest) -> None:
    app.switch_page("views/trajectory.py")
    app.query_params["id"] = "does-not-exist"
    app.run()
    assert not app.exception
    assert any("No trajectory with id" in e.value for e in app.error)


def test_browse_filters_by_final_failure_label(
    demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from labeling.store import open_store
    from taxonomy import default_taxonomy

    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    ws = Workspace(root)
    failed = [r["id"] for r in ws.list(failed=True)[:3]]
    store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
    store.users.ensure("ann", "annotator")
    version = default_taxonomy().version
    for tid in failed[:2]:
        store.labels.add(tid, "sql_logic_error", annotator="ann", taxonomy_version=version)
    store.labels.add(failed[2], "stuck_in_loop", annotator="ann", taxonomy_version=version)
    store.close()
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.session_state["identity_name"] = "ann"
    at.run()
    at.switch_page("views/browse.py").run()
    at.multiselect(key="browse_failure_labels").set_value(["sql_logic_error"]).run()
    assert not at.exception
    assert sorted(at.dataframe[0].value["id"]) == sorted(failed[:2])
    # Blind mode: another annotator cannot find ann's labels through the filter.
    other = AppTest.from_file(MAIN, default_timeout=60)
    other.session_state["identity_name"] = "bob"
    other.run()
    other.switch_page("views/browse.py").run()
    other.multiselect(key="browse_failure_labels").set_value(["sql_logic_error"]).run()
    assert not other.exception
    assert other.dataframe[0].value.empty


def test_unscored_trajectory_is_never_success_or_failure(
    demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import streamlit as st

    from tests.support import make_trajectory
    from trajectories.model import Outcome, Run, Task

    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    ws = Workspace(root)
    # A test-split task: the producer recorded no gold answer, and null == null would have
    # been an exact match.
    task = Task(id="no-truth-1", question="How many admissions?", has_ground_truth=False)
    run = Run(name="harness-test", model="m", temperature=0.0, rollout=0)
    unscored = make_trajectory(task=task, run=run, final_answer=None).with_id()
    recorded = make_trajectory(task=task, run=run.model_copy(update={"rollout": 1}),
                               final_answer=None, outcome=Outcome(success=False)).with_id()
    ws.add([(unscored, None), (recorded, None)])
    assert {r["id"]: r["outcome"] for r in ws.list(run="harness-test")} == {
        unscored.id: "unscored", recorded.id: "failure"}
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = str(unscored.id)
    at.run()
    assert not at.exception
    panel = answer_panel(at)
    # No gold: the judge cannot decide either (a person would), and nothing says success.
    assert verdicts(panel) == {"Judge": "undecided", "Exact match": "unscored",
                               "Recorded outcome": "none"}
    captions = [c.value for c in at.caption]
    assert any("outcome: **unscored**" in c for c in captions)
    assert not any("outcome: **success" in c or "outcome: **failure" in c for c in captions)
    assert 'role="status">Unscored: the task has no ground truth' in panel
    assert "None recorded" in panel
    # With a recorded verdict the trajectory is scored by it; exact match stays unscored.
    at.query_params["id"] = str(recorded.id)
    at.run()
    assert not at.exception
    panel = answer_panel(at)
    assert verdicts(panel) == {"Judge": "undecided", "Exact match": "unscored",
                               "Recorded outcome": "wrong"}
    assert any("outcome: **failure**" in c.value for c in at.caption)
    assert "Unscored:" not in panel
    st.cache_resource.clear()
    st.cache_data.clear()


def test_collapsed_steps_are_built_only_when_opened(
    demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import streamlit as st

    from tests.support import make_trajectory
    from trajectories.model import Step, StepKind

    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    long_output = "\n".join(f"row {i}: " + "x" * 40 for i in range(60))  # over the collapse size
    thought = "Maybe the admissions table. " * 10
    traj = make_trajectory(steps=[
        Step(kind=StepKind.THINKING, content=thought),
        Step(kind=StepKind.SQL, code="SELECT * FROM admissions", observation=long_output),
    ]).with_id()
    Workspace(root).add([(traj, None)])
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = str(traj.id)
    at.run()
    assert not at.exception
    labels = [e.label for e in at.expander]
    assert f"Observation ({len(long_output):,} characters)" in labels, labels
    assert f"0. Thinking ({len(thought):,} characters)" in labels, labels
    codes = [c.value for c in at.code]
    assert long_output not in codes and thought not in codes  # collapsed: not built
    at.session_state[f"step_{traj.id}_1_obs_0"] = True
    at.session_state[f"step_{traj.id}_0_0"] = True
    at.run()
    assert not at.exception
    codes = [c.value for c in at.code]
    assert long_output in codes and thought in codes  # opened: built
    st.cache_resource.clear()
    st.cache_data.clear()


def test_next_and_previous_failure_move_the_deep_link(app: AppTest, demo_workspace: Path) -> None:
    from trajectories.views import failure_neighbours

    ws = Workspace(demo_workspace)
    failed = ws.list(failed=True)[5]["id"]
    _, after = failure_neighbours(ws, failed)
    assert after is not None
    app.switch_page("views/trajectory.py")
    app.query_params["id"] = failed
    app.run()
    app.button(key="next_failure").click().run()
    assert not app.exception
    assert app.query_params["id"] == after
    assert any(f"Trajectory {after}" in c.value for c in app.caption)
    app.button(key="prev_failure").click().run()
    assert app.query_params["id"] == failed
    assert any(f"Trajectory {failed}" in c.value for c in app.caption)


def test_recorded_and_rerun_errors_are_named_and_cut_tables_stay_tables(
    demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import streamlit as st

    from tests.support import make_trajectory
    from trajectories.model import Step, StepKind

    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    note = "Note: There are 73 results not shown (out of 76 total results)."
    cut = "[('insulin', 3), ('heparin', 2), ('aspirin', 1)]\n\n" + note
    traj = make_trajectory(steps=[
        Step(kind=StepKind.SQL, code="SELECT drug, n FROM prescriptions", observation=cut),
        Step(kind=StepKind.SQL, code="SELECT nope FROM nowhere",
             observation="no such table: nowhere", error=True),
    ]).with_id()
    Workspace(root).add([(traj, None)])
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = str(traj.id)
    at.session_state[f"rerun_steps_{traj.id}"] = True  # the steps' re-run box, opened
    at.run()
    at.button(key=f"rerun_btn_{traj.id}_1").click().run()
    assert not at.exception
    # The cut result is a table of its rows, with the producer's note under it.
    blocks = "".join(h.value for h in at.html)
    cells = re.findall(r"<td>([^<]*)</td>", blocks)
    assert cells[0::2][:3] == ["insulin", "heparin", "aspirin"], cells
    assert "73 results not shown" in blocks
    assert re.search(r"<b>Recorded error:</b> no such table: nowhere", blocks), blocks
    errors = [e.value for e in at.error]
    # Named as the re-run's, with the step it re-ran.
    assert any(e.startswith(r"**Re-run error \(step 1\):**") for e in errors), errors
    st.cache_resource.clear()
    st.cache_data.clear()
