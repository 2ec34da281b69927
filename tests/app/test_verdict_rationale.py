"""The LLM judge's reasoning shows beside its verdict on Trajectory (where the verdict box
shows no evidence) and on Annotate's compact line (where a decided item's evidence is cut):
"Judge: correct by an LLM judge." alone gave a lead nothing to check."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from faillab.app.widgets.safe import escape_markdown

RATIONALE = ("model-x: the answer states 2,845 mL, which is the gold value; the last SQL "
             "result agrees <b>bold</b> *not emphasis*")


def _page(compact: bool, evidence: bool, rationale: str) -> None:
    from faillab.app.widgets.verdict import render_verdict

    outcome = {"recorded_success": None, "judge_verdict": "correct", "judge_method": "llm",
               "judge_evidence": rationale}
    render_verdict(None, "t1", None, outcome, key="v", compact=compact, evidence=evidence)


@pytest.mark.parametrize(("compact", "evidence"), [(True, True), (False, False)])
def test_the_llm_judges_reasoning_is_shown_in_full_and_as_text(compact: bool,
                                                               evidence: bool) -> None:
    at = AppTest.from_function(_page, args=(compact, evidence, RATIONALE * 2))
    at.run()
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert any("by an LLM judge" in c for c in captions)
    shown = "\n".join(captions)
    # The whole reasoning, twice over (nothing cut), with its markup escaped as data.
    assert escape_markdown(RATIONALE * 2) in shown
    assert "<b>" not in shown and "\\*not emphasis\\*" in shown


def test_a_rule_verdict_keeps_its_one_line() -> None:
    def page() -> None:
        from faillab.app.widgets.verdict import render_verdict

        render_verdict(None, "t1", None, {"recorded_success": None, "judge_verdict": "correct",
                                          "judge_method": "exact_match",
                                          "judge_evidence": "exact"},
                       key="v", evidence=False)

    at = AppTest.from_function(page)
    at.run()
    assert [c.value for c in at.caption] == ["Judge: **correct** by exact match."]
