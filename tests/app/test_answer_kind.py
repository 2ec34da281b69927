"""Which answers render as Markdown and which keep the compact value box: the choice is a pure
function (``reads_as_prose``), and the Trajectory panel follows it on both sides of the pair."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from faillab.app.widgets.answer import answer_panel_parts
from faillab.app.widgets.answer_kind import reads_as_prose
from faillab.app.widgets.safe import safe_markdown
from tests.support import make_trajectory
from trajectories.model import Task

PROSE = [
    "After querying the MIMIC-IV database:\n\n* **Patient ID:** 10004235  \n* **Date:** 2099-12-24",
    "**Total fluid output**\n\n| Measurement | Value |\n|---|---|\n| Sum | 2,845 mL |",
    "* **Patient ID:** 10004235",
    "The patient moved from the med/surg unit and no later unit is listed after the discharge.",
    "Only **one** patient had a placement.",
    "# Result",
    "1. insulin",
    "For patient 10003046 the final transfer was `med/surg`.",
]
VALUES = [
    "0", "6.357", "2100-12-24 14:02:00", "married", "med/surg",
    "0.9% sodium chloride; 5% dextrose; ampicillin-sulbactam; glucagon; insulin; pantoprazole",
    "a; b; c", "", "   ", '[["insulin"], ["vial"]]', '{"count": 3}', "-5", "2 * 3",
    52, 6.357, None, True, [["insulin"], ["vial"]], {"count": 3},
]


@pytest.mark.parametrize("answer", PROSE)
def test_prose_reads_as_prose(answer: str) -> None:
    assert reads_as_prose(answer)


@pytest.mark.parametrize("answer", VALUES)
def test_values_keep_the_compact_box(answer: object) -> None:
    assert not reads_as_prose(answer)


HOSTILE = ("* **Drug:** heparin <img src=x onerror=alert(1)> <script>alert(2)</script>\n"
           "* [click](javascript:alert(3)) ![p](http://example.invalid/p.png) :red[x] $5$")


def test_the_trajectory_panel_draws_prose_sides_as_markdown_and_values_as_html() -> None:
    prose = make_trajectory(final_answer=HOSTILE)
    _, pair, tail = answer_panel_parts(prose)
    assert [(caption, html is None) for caption, _, html in pair] == [
        ("Final answer", True), ("Ground truth", False)]
    assert "no row diff" in tail
    value = make_trajectory(final_answer=52)
    _, pair, tail = answer_panel_parts(value)
    assert all(html is not None for _, _, html in pair) and "faillab-diff" in tail
    gold_prose = make_trajectory(task=Task(id="t2", question="Which?", ground_truth=HOSTILE))
    _, pair, _ = answer_panel_parts(gold_prose)
    assert [html is None for _, _, html in pair] == [False, True]


def _panel(doc: str) -> None:
    from faillab.app.widgets.answer import render_answer_panel
    from trajectories.model import Trajectory

    render_answer_panel(Trajectory.model_validate_json(doc))


def test_a_hostile_prose_answer_is_safe_markdown_on_the_trajectory_panel() -> None:
    at = AppTest.from_function(_panel, args=(make_trajectory(final_answer=HOSTILE)
                                             .model_dump_json(),))
    at.run()
    assert not at.exception
    [answer] = [m.value for m in at.markdown if "Drug" in m.value]
    assert answer == safe_markdown(HOSTILE)
    for raw in ("<img", "<script", "[click]", "![", ":red[", "$5"):
        assert re.search(r"(?<!\\)" + re.escape(raw), answer) is None, raw
    # The markup around it is still one escaped block above and one below.
    assert all("<img" not in h.value and "<script" not in h.value for h in at.html)
