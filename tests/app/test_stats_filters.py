"""The line under Statistics' Filters button: what the page counts, in words, data escaped."""

from __future__ import annotations

from faillab.app.widgets.stats_filters import Selection, selection_line
from faillab.app.widgets.stats_options import LABEL_SCOPES

RUNS = ["run-a", "run-b", "run-c", "run-d", "run-e"]
INTENTS = ["Demographics", "Vitals"]
SCOPES = ["patient", "population"]


def line(selection: Selection) -> str:
    return selection_line(selection, runs=RUNS, intents=INTENTS, scopes=SCOPES,
                          trajectories=1234, labels=7, pairs=3)


def test_everything_chosen_reads_as_all_with_the_defaults_named() -> None:
    text = line(Selection(RUNS, INTENTS, SCOPES, LABEL_SCOPES[0]))
    assert text.startswith("1,234 trajectories · runs: all 5 · intents: all 2 · scopes: all 2 · ")
    # Said once: the run count is in "runs: ...", the success source has its own line.
    assert text.count("5") == 1 and "success source" not in text
    assert "7 final labels counted (labels: human-confirmed only (the default)), " \
           "3 pre-label/human pairs." in text


def test_a_narrowed_choice_names_what_is_kept() -> None:
    text = line(Selection(RUNS[:4], ["Vitals"], SCOPES, LABEL_SCOPES[1]))
    assert "runs: 4 of 5 (run\\-a, run\\-b, run\\-c and 1 more)" in text
    assert "intents: 1 of 2 (Vitals)" in text
    assert "scopes: all 2" in text
    assert "(labels: include LLM-only (default: human-confirmed only))" in text


def test_run_names_are_text_not_markup() -> None:
    hostile = "[click](http://evil.example) <b>x</b>"
    text = selection_line(Selection([hostile], INTENTS, SCOPES, LABEL_SCOPES[0]),
                          runs=[hostile, "other"], intents=INTENTS, scopes=SCOPES,
                          trajectories=1, labels=0, pairs=0)
    assert "[click](" not in text and "<b>" not in text
    assert "\\[click\\]\\(http" in text
