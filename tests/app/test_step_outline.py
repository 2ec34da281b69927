"""Annotate's step cursor: the step under it in full, neighbours and the rest as one-liners."""

from __future__ import annotations

import html

from streamlit.testing.v1 import AppTest

from faillab.app.widgets.step_cursor import starting_step
from trajectories.model import Step, StepKind
from trajectories.render import COLLAPSE_CHARS


def _steps() -> list[Step]:
    steps = [Step(kind=StepKind.MESSAGE, role="user", content="How many?")]
    steps += [Step(kind=StepKind.SQL, code=f"SELECT {i} -- <b>{i}</b>", observation=f"[({i},)]")
              for i in range(1, 8)]
    steps.append(Step(kind=StepKind.SQL, code="SELECT long",
                      observation="x" * (COLLAPSE_CHARS + 1)))
    steps.append(Step(kind=StepKind.THINKING, content="Maybe the admissions table."))
    steps.append(Step(kind=StepKind.SQL, code="SELECT last", observation="[(0,)]", error=True))
    return steps


def _cursor(steps_json: list[str], start: int) -> None:
    from faillab.app.widgets.step_cursor import render_step_cursor
    from trajectories.model import Step

    steps = [Step.model_validate_json(s) for s in steps_json]
    render_step_cursor(steps, "t", start=start)


def _run(start: int) -> AppTest:
    at = AppTest.from_function(_cursor, args=([s.model_dump_json() for s in _steps()], start))
    at.run()
    assert not at.exception
    return at


def test_the_cursor_step_is_drawn_whole_and_the_rest_folds_to_lines() -> None:
    at = _run(6)
    blocks = "".join(h.value for h in at.html)
    assert "Steps 0–4 (5 before)" in blocks and "Steps 8–10 (3 after)" in blocks
    # Neighbours and folded steps are one-line summaries (escaped) with their bodies inside.
    for i in (1, 5, 7):
        assert f"<summary>{i}. SQL · {html.escape(f'SELECT {i} -- <b>{i}</b>')}" in blocks
    # A body that needs Streamlit (the long observation, the thinking) is its line alone.
    assert '<div class="faillab-far-line">8. SQL · SELECT long' in blocks
    assert ('<div class="faillab-far-line">9. Thinking' in blocks)
    assert '<summary>10. SQL · SELECT last · <span class="faillab-error-mark">error' in blocks
    # Step 6 is in full, not a summary line; it is the one step seen.
    assert "<summary>6." not in blocks and html.escape("SELECT 6 -- <b>6</b>") in blocks
    assert at.session_state["lf_seen_steps"] == (6,)
    # Eleven steps numbered 0-10: the count and the numbering both said ("of 10" read as ten).
    assert any("Step **6** of 0–10" in m.value for m in at.markdown)


def test_moving_the_cursor_adds_to_what_was_seen_and_stops_at_the_ends() -> None:
    at = _run(9)
    at.button(key="annotate_step_next").click().run()
    assert at.session_state["lf_cursor"] == 10
    assert at.button(key="annotate_step_next").disabled
    assert at.session_state["lf_seen_steps"] == (9, 10)
    # A long observation under the cursor keeps its on-demand expander.
    for _ in range(2):
        at.button(key="annotate_step_prev").click().run()
    assert at.session_state["lf_cursor"] == 8
    assert next(e.label for e in at.expander).startswith("Observation (")
    at.button(key="annotate_step_mark").click().run()
    assert at.session_state["lf_step"] == 8


def test_the_cursor_opens_where_the_trajectory_went_wrong() -> None:
    steps = _steps()
    assert starting_step(steps, evidence_step=3, prelabel_step=5) == 3
    assert starting_step(steps, evidence_step=None, prelabel_step=5) == 5
    # No evidence and no pre-label on screen: the first step that errored.
    assert starting_step(steps, evidence_step=None, prelabel_step=None) == 10
    # Out-of-range indices are ignored; without errors, the last action.
    clean = [s.model_copy(update={"error": False}) for s in steps]
    assert starting_step(clean, evidence_step=99, prelabel_step=None) == 10
    assert starting_step(clean[:1], evidence_step=None, prelabel_step=None) == 0


def test_only_the_agents_steps_can_be_marked_as_the_first_faulty_step() -> None:
    at = _run(0)  # the user's question
    mark = next(b for b in at.button if b.label in ("Mark", "Marked"))
    assert mark.disabled  # F does nothing there either (a disabled button takes no key)
    at = _run(9)  # the agent's thinking is its own step
    mark = next(b for b in at.button if b.label in ("Mark", "Marked"))
    assert not mark.disabled
    mark.click().run()
    assert at.session_state["lf_step"] == 9
