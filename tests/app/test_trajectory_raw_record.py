"""The Trajectory page's raw record (the imported JSON, collapsed and built only when opened)
and each step's duration and token counts where the log recorded them. Hostile strings in the
record stay text: the JSON is a code block, never HTML or Markdown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab.app.widgets.steps import usage_text
from tests.app.support import serve_workspace
from tests.support import REPO, make_trajectory
from trajectories.model import Step, StepKind, Task
from trajectories.workspace import Workspace

MAIN = str(REPO / "app" / "main.py")
HOSTILE = '<img src=x onerror="alert(1)"></script><b>**bold**</b> [x](javascript:alert(2))'


@pytest.fixture
def trajectory_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    traj = make_trajectory(
        task=Task(id="t-raw", question=f"How many? {HOSTILE}", intent="Labs",
                  reference_sql="SELECT 1"),
        steps=[
            Step(kind=StepKind.MESSAGE, role="user", content=f"How many? {HOSTILE}"),
            Step(kind=StepKind.SQL, code="SELECT 1", observation="[(1,)]", duration_ms=2345.0,
                 tokens={"prompt": 1357, "completion": 365, "total": 1722}),
            Step(kind=StepKind.TOOL_CALL, name="lookup", arguments="{}", observation="ok",
                 duration_ms=16.0),
            Step(kind=StepKind.MESSAGE, role="assistant", content="1",
                 tokens={"input": 10, "output": 2}),
        ],
        final_answer=1, producer_note=HOSTILE)
    root = tmp_path / "ws"
    ws = Workspace(root)
    ws.add([(traj.with_id(), "raw-record-test.jsonl")])
    serve_workspace(root, monkeypatch)
    tid = str(ws.list(limit=1)[0]["id"])
    yield tid
    st.cache_resource.clear()
    st.cache_data.clear()


def _page(tid: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.run()
    at.switch_page("views/trajectory.py")
    at.query_params["id"] = tid
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_raw_record_is_collapsed_then_shows_the_imported_json_inert(trajectory_id: str) -> None:
    at = _page(trajectory_id)
    boxes = [e for e in at.expander if e.label == "Raw record (imported JSON)"]
    assert len(boxes) == 1
    assert not [c for c in at.code if c.language == "json" and "producer_note" in c.value]

    at.session_state[f"raw_record_{trajectory_id}"] = True  # open it, as a click does
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    records = [c for c in at.code if c.language == "json" and '"producer_note"' in c.value]
    assert len(records) == 1
    record = json.loads(records[0].value)
    assert record["id"] == trajectory_id
    assert record["producer_note"] == HOSTILE  # a field the format does not name is kept
    assert record["steps"][1]["tokens"] == {"prompt": 1357, "completion": 365, "total": 1722}
    # Nowhere on the page does the hostile text become markup.
    for block in at.html:
        assert "<img" not in block.value and "<script" not in block.value.lower()
    for md in at.markdown:
        assert "javascript:alert" not in md.value or "\\" in md.value


def test_steps_show_duration_and_tokens_where_recorded(trajectory_id: str) -> None:
    at = _page(trajectory_id)
    steps = "\n".join(h.value for h in at.html if "faillab-step" in h.value)
    assert "2.3 s · 1,722 tokens (prompt 1,357, completion 365)" in steps
    assert "16 ms" in steps
    assert "12 tokens (input 10, output 2)" in steps


def test_usage_text_is_empty_without_figures() -> None:
    assert usage_text(Step(kind=StepKind.SQL, code="SELECT 1")) == ""
    assert usage_text(Step(kind=StepKind.SQL, duration_ms=999.6)) == "1.0 s"
    assert usage_text(Step(kind=StepKind.SQL, tokens={"total_tokens": 5})) == "5 tokens"


def test_prose_answer_fences_are_code_blocks_of_their_own() -> None:
    from faillab.app.widgets.answer import prose_parts

    text = "The count:\n\n```sql\nSELECT x FROM t WHERE d = '2099-12-24';\n```\n\n**0**"
    assert prose_parts(text) == [("The count:\n\n", None),
                                 ("SELECT x FROM t WHERE d = '2099-12-24';", "sql"),
                                 ("\n\n**0**", None)]
    assert prose_parts("no fence") == [("no fence", None)]
    assert prose_parts("```\nnot closed") == [("```\nnot closed", None)]
