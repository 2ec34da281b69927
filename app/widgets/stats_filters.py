"""The Statistics page's filters, behind one button, and the line that says what is counted.

The filters sit in a popover: drawn open on the page, three multiselects and two radios were
most of the page's own cost in a new browser (their scripts are fetched and their widgets
mounted before anything else shows) and pushed the first chart under the fold at 1440x900,
while people read tables far more often than they change a filter. A popover's content is
mounted only when it is opened. The line under the button always states the selection, so a
chart never counts something the reader cannot see on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from faillab.app.widgets.safe import escape_markdown
from faillab.app.widgets.stats_data import labels_for
from faillab.app.widgets.stats_options import label_scope_choice, label_scope_note

#: How many chosen values the summary line names before it only counts them.
NAMED = 3
MENU_KEY = "stats_filters_menu"
# The menu is as wide as the page allows (it opened 704 px wide, cutting run names of a hundred
# characters, as real runs have, to "…" in their chips).
_MENU_CSS = f"""<style>
[data-testid="stPopoverBody"]:has(.st-key-{MENU_KEY}) {{
  max-width: min(1040px, calc(100vw - 400px)) !important;
}}
</style>"""


@dataclass(frozen=True)
class Selection:
    """What the reader chose; an empty choice means "pick at least one", not "all"."""

    runs: list[str]
    intents: list[str]
    scopes: list[str]
    label_scope: str

    @property
    def complete(self) -> bool:
        return bool(self.runs and self.intents and self.scopes)


def filters_box() -> DeltaGenerator:
    """The button that opens the filters; pass it to the choosers below."""
    return st.popover("Filters", icon=":material/filter_list:",
                      help="Runs, intents, scopes, the labels counted and the success source.")


def choose(box: DeltaGenerator, runs: list[str], intents: list[str],
           scopes: list[str]) -> Selection:
    """The filters inside `box`; every option is chosen until the reader takes some out."""
    menu = box.container(key=MENU_KEY)
    menu.html(_MENU_CSS)
    chosen_runs = menu.multiselect("Runs", runs, default=runs, key="stats_runs")
    chosen_intents = menu.multiselect("Intents", intents, default=intents, key="stats_intents")
    chosen_scopes = menu.multiselect("Scopes", scopes, default=scopes, key="stats_scopes")
    label_scope = label_scope_choice(menu)
    if menu.button("Reload labels", key="stats_reload", help="Labels are cached for 30 seconds."):
        labels_for.clear()
        st.rerun()
    return Selection(list(chosen_runs), list(chosen_intents), list(chosen_scopes), label_scope)


def _part(name: str, chosen: Sequence[str], options: Sequence[str]) -> str:
    if len(chosen) == len(options):
        return f"{name}: all {len(options)}"
    named = ", ".join(escape_markdown(str(c)) for c in chosen[:NAMED])
    more = f" and {len(chosen) - NAMED} more" if len(chosen) > NAMED else ""
    return f"{name}: {len(chosen)} of {len(options)} ({named}{more})"


def selection_line(selection: Selection, *, runs: Sequence[str], intents: Sequence[str],
                   scopes: Sequence[str], trajectories: int, labels: int, pairs: int) -> str:
    """One caption: how many trajectories, which filters and which labels count (names are
    data, so they are escaped). The success source has its own line below (`source_note`)."""
    labelled = label_scope_note(selection.label_scope)  # "Labels: ..." inside a sentence
    return (
        f"{trajectories:,} trajectories · "
        + " · ".join([_part("runs", selection.runs, runs),
                      _part("intents", selection.intents, intents),
                      _part("scopes", selection.scopes, scopes)])
        + f" · {labels:,} final labels counted ({labelled[0].lower()}{labelled[1:]}), "
        f"{pairs:,} pre-label/human pairs."
    )
