"""Statistics page choices: success source, Pass^k layout, SR(T) definition, and the captions
that say which outcomes and labels each table counts (docs/scoring.md)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from analysis.exports_paper import label_note
from analysis.passk import PASS_AT_TEMPERATURE, PASS_HAT_TEMPERATURE
from analysis.sources import Inputs, TableOptions, compute_table
from analysis.tables import LABEL_POLICIES
from analysis.turns import SR_DEFINITIONS, common_solved_tasks, solved_task_counts
from faillab.app.widgets.safe import escape_markdown
from trajectories.workspace import DEFAULT_SUCCESS_SOURCE, SUCCESS_SOURCES

SOURCE_TEXT = {
    "verdict": "people's verdicts, else the producer's recorded verdict, else the judge's "
               "(exact match, the last SQL result, the answer's prose, abstention)",
    "recorded": "the producer's recorded verdict, else exact match",
    "exact_match": "exact match (EHR-Complex's scoring), else the recorded verdict",
}
SR_TEXT = {
    "common_solved": "common_solved, the paper's SR(T): over the tasks every selected run "
                     "solved, the share solved within T turns (every curve reaches 1)",
    "all_trajectories": "all_trajectories: every scored trajectory of the run is in the "
                        "denominator",
}
PASSK_LAYOUTS = ("per run", "paper")
#: Which labels each label table counts (final labels are computed per viewer by the store).
LABEL_CAPTIONS = {
    "taxonomy": "Counts final labels (which ones: see below); disputed items (humans "
                "disagree, not adjudicated) have no category and are left out.",
    "taxonomy_turns": "Counts final labels (which ones: see below); disputed items are "
                      "left out.",
    "provenance": "Counts every final label by where it comes from: adjudicated, human "
                  "(agreed or single), LLM-only pre-labels, and disputed items.",
    "labeller": "Counts trajectories with both an LLM pre-label and a human-derived final label "
                "(adjudicated, agreed or single annotator); LLM-only and disputed items are "
                "left out.",
    "taxonomy_corrected": "Counts every final label whatever the labels counted: people's as "
                          "they are, the LLM-only ones corrected by the machine's errors on the "
                          "items people checked (the checked column); machine_share says how "
                          "much of each model's failures the machine labelled. Disputed items "
                          "are left out.",
}


#: Which final labels the label tables count; the first is the default.
LABEL_SCOPES = ("human-confirmed only", "include LLM-only")


def label_scope_choice(box: DeltaGenerator) -> str:
    """Human-confirmed labels only (the default) or also unreviewed LLM pre-labels."""
    scope = box.radio(
        "Labels counted", LABEL_SCOPES, horizontal=True, key="stats_label_scope",
        help="human-confirmed: adjudicated, or given by annotators (agreed or single). "
             "LLM-only pre-labels nobody has reviewed are left out unless included here.",
    )
    return str(scope or LABEL_SCOPES[0])


def label_scope_note(scope: str) -> str:
    return f"Labels: {scope}{default_note(scope, LABEL_SCOPES[0])}"


def default_note(chosen: str, default: str, also: str = "") -> str:
    """" (the default)" or " (default: X)", `also` inside the brackets: every choice the page
    states says which it is."""
    return f" (the default{also})" if chosen == default else f" (default: {default}{also})"


#: Label tables whose counts follow the "Labels counted" choice.
SCOPED_TABLES = frozenset({"taxonomy", "taxonomy_turns"})


def chart_label_note(table: str, scope: str) -> str:
    """The line a label chart carries so a picture, shown or exported, says what it counts:
    the export path's own line (`faillab stats` writes the same)."""
    return label_note(table, LABEL_POLICIES[0] if scope == LABEL_SCOPES[0] else LABEL_POLICIES[1])


def success_source_choice(box: DeltaGenerator) -> str:
    """The success source radio; its default is the CLI's (``faillab stats``)."""
    source = box.radio(
        "Success source", SUCCESS_SOURCES, index=SUCCESS_SOURCES.index(DEFAULT_SUCCESS_SOURCE),
        horizontal=True, key="stats_success_source",
        help="; ".join(f"{name}: {SOURCE_TEXT[name]}" for name in SUCCESS_SOURCES) + ".",
    )
    return str(source or DEFAULT_SUCCESS_SOURCE)


def outcome_counts(frame: pd.DataFrame) -> tuple[int, int]:
    """(trajectories whose recorded and exact-match outcomes disagree, unscored trajectories)."""
    if frame.empty:
        return 0, 0
    both = frame["recorded_success"].notna() & frame["exact_match"].notna()
    recorded = frame.loc[both, "recorded_success"].astype(bool)
    exact = frame.loc[both, "exact_match"].astype(bool)
    return int((recorded != exact).sum()), int(frame["success"].isna().sum())


def source_note(frame: pd.DataFrame, source: str) -> str:
    differ, unscored = outcome_counts(frame)
    default = default_note(source, DEFAULT_SUCCESS_SOURCE, also=", as in `faillab stats`")
    return (
        f"Success source: {source}{default}: {SOURCE_TEXT[source]}. Recorded and exact-match "
        f"outcomes disagree on {differ:,} of these trajectories; {unscored:,} are unscored "
        "or undecided (no ground truth, or a verdict nobody has given yet) and left out of "
        "every table."
    )


def passk_view(long: pd.DataFrame, frame: pd.DataFrame, runs: list[str]) -> pd.DataFrame:
    """The Pass^k table in the layout the reader picks: per run (long) or the paper's."""
    layout = st.radio(
        "Pass^k table layout", PASSK_LAYOUTS, horizontal=True, key="stats_passk_layout",
        help="paper: EHR-Complex Tables 22-26, Pass^k and Pass@k of one model in one row.",
    )
    if layout != "paper":
        return long
    paper = compute_table("passk", Inputs(frame), runs,
                          TableOptions(tuple(runs), passk_layout="paper"))
    st.caption(
        f"Paper layout (EHR-Complex Tables 22-26): one row per model and view; Pass^k from the "
        f"model's T={PASS_HAT_TEMPERATURE:g} run and Pass@k from its T={PASS_AT_TEMPERATURE:g} "
        "run (pass_hat_run / pass_at_run name them; empty when that run is not selected)."
    )
    return paper


def turn_budget_view(default: pd.DataFrame, frame: pd.DataFrame, runs: list[str]) -> pd.DataFrame:
    """SR(T) under the definition the reader picks (the paper's by default), named below."""
    definition = str(st.radio(
        "SR(T) definition", SR_DEFINITIONS, horizontal=True, key="stats_sr_definition",
    ) or SR_DEFINITIONS[0])
    st.caption(f"SR(T) definition: {SR_TEXT[definition]}.")
    if definition == SR_DEFINITIONS[0]:
        return default
    return compute_table("turn_budget", Inputs(frame), runs,
                         TableOptions(tuple(runs), sr_definition=definition))


def no_common_tasks_note(name: str, frame: pd.DataFrame,
                         runs: list[str]) -> tuple[str, list[str]]:
    """Why a turns table on the commonly solved tasks is empty ("" when some task is), and
    the selected runs that solved no task.

    On real logs one short run that solved nothing empties both turns tables; "no data" did not
    say so, nor what to do about it. Only the turns table and SR(T) under the paper's definition
    are on the commonly solved tasks."""
    definition = st.session_state.get("stats_sr_definition", SR_DEFINITIONS[0])
    if name != "turns" and (name != "turn_budget" or definition != SR_DEFINITIONS[0]):
        return "", []
    counts = solved_task_counts(frame, runs)
    if not counts or common_solved_tasks(frame, runs):
        return "", []
    nothing = [run for run, n in counts.items() if n == 0]
    if nothing:
        named = ", ".join(escape_markdown(run) for run in nothing[:3])
        more = f" and {len(nothing) - 3} more" if len(nothing) > 3 else ""
        why = f"{len(nothing)} of the {len(counts)} selected runs solved no task ({named}{more})"
    else:
        low, high = min(counts.values()), max(counts.values())
        why = (f"each selected run solved {low:,}-{high:,} tasks, but no task was solved by "
               "all of them")
    also = " or choose the all_trajectories definition above" if name == "turn_budget" else ""
    note = (f"No task was solved by every selected run: {why}. This table compares runs on "
            f"the tasks all of them solved (EHR-Complex Fig. 5); take runs out under "
            f"Filters{also}.")
    return note, nothing


def leave_out_runs(runs: list[str]) -> None:
    """Button callback: take `runs` out of the Filters' run selection (before the next run
    draws the menu, the only moment its value may change)."""
    st.session_state["stats_runs"] = [r for r in st.session_state.get("stats_runs", [])
                                      if r not in runs]
