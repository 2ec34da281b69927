"""The Annotate steps pane: far steps as native one-liners, built without a script run."""

from __future__ import annotations

import html

from streamlit.testing.v1 import AppTest

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


def _outline(steps_json: list[str], full: list[int]) -> None:
    from faillab.app.widgets.step_outline import render_step_outline
    from trajectories.model import Step

    steps = [Step.model_validate_json(s) for s in steps_json]
    render_step_outline(steps, full=set(full), pick=lambda i: None, key_prefix="t")


def test_far_steps_are_details_lines_and_only_long_bodies_wait_for_an_expander() -> None:
    at = AppTest.from_function(_outline, args=([s.model_dump_json() for s in _steps()], [6]))
    at.run()
    assert not at.exception
    blocks = "".join(h.value for h in at.html)
    for i in (4, 5, 7):
        assert f"<summary>{i}. SQL · {html.escape(f'SELECT {i} -- <b>{i}</b>')}" in blocks
        assert f"{html.escape(f'SELECT {i} -- <b>{i}</b>')}</pre>" in blocks  # its body too
    assert '<summary>10. SQL · SELECT last · <span class="faillab-error-mark">error' in blocks
    # Step 6 is drawn in full with its button; the long observation (8) and the thinking (9)
    # keep their on-demand expanders, built only when opened.
    assert "<summary>6." not in blocks
    assert [b.key for b in at.button if b.key and b.key.startswith("pick_t_")] == [
        f"pick_t_{i}" for i in (1, 2, 3, 6)]
    labels = [e.label for e in at.expander]
    assert len(labels) == 2 and labels[0].startswith("8. SQL") and "Thinking" in labels[1]
