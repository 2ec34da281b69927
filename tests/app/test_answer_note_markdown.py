"""The note a person wrote beside an imported verdict (a results table's "Incorrect Note") is
shown with the outcome on Trajectory and Annotate, and a prose answer reads as Markdown (a
bulleted, bold line) with no link, image, HTML or Streamlit directive made from it."""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from faillab.app.widgets.answer import answer_panel_html
from faillab.app.widgets.safe import safe_markdown
from tests.support import make_trajectory
from trajectories.model import Outcome

NOTE = "Counted admissions, not <b>patients</b>"
PROSE = ("* **Patient ID:** 10004235\n* **Drug:** heparin <img src=x onerror=alert(1)> "
         "![pixel](http://example.invalid/p.png) [click](javascript:alert(1)) :red[x] $5")


def _traj_json() -> str:
    outcome = Outcome.model_validate({"success": False, "source": "human", "note": NOTE})
    return make_trajectory(final_answer=PROSE, outcome=outcome).model_dump_json()


def test_the_trajectory_panel_shows_the_note_escaped() -> None:
    from trajectories.model import Trajectory

    html = answer_panel_html(Trajectory.model_validate_json(_traj_json()))
    assert "Note with the recorded outcome:" in html
    assert "Counted admissions, not &lt;b&gt;patients&lt;/b&gt;" in html and "<b>pat" not in html


def _compact(doc: str) -> None:
    from faillab.app.widgets.answer import render_answer_compact
    from trajectories.model import Trajectory

    render_answer_compact(Trajectory.model_validate_json(doc))


def test_annotate_shows_the_note_and_the_prose_answer_as_safe_markdown() -> None:
    at = AppTest.from_function(_compact, args=(_traj_json(),))
    at.run()
    assert not at.exception
    assert any("Counted admissions, not &lt;b&gt;" in h.value for h in at.html)
    [answer] = [m.value for m in at.markdown if "Patient ID" in m.value]
    assert answer == safe_markdown(PROSE)
    # Structure kept (list items, bold); every way out of plain text escaped.
    assert answer.startswith("* **Patient ID\\:** 10004235\n* **Drug\\:**")
    for raw in ("<img", "![", "[click]", ":red[", "$5"):
        # Each opening character is backslash-escaped, so it shows as itself.
        assert re.search(r"(?<!\\)" + re.escape(raw), answer) is None, raw
