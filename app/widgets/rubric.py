"""The labelling rubric (definitions, decision rules, an example per category) beside the form."""

from __future__ import annotations

import re

import streamlit as st

from taxonomy import Taxonomy, rubric_markdown


@st.cache_data(show_spinner=False)
def _rubric_text(taxonomy_json: str) -> str:
    # Keyed by the taxonomy's content, so an edited taxonomy shows its new rubric.
    return rubric_markdown(Taxonomy.from_json(taxonomy_json))


def render_rubric(taxonomy: Taxonomy, *, height: int = 520) -> None:
    """The rubric in a scrollable box; rubric_markdown escapes every markup character."""
    with st.container(height=height, border=True, key="rubric_box", autoscroll=False):
        st.markdown(_rubric_text(taxonomy.to_json()))


def category_initials(names: list[str]) -> list[str]:
    """``Medical-Code Lookup Error`` -> ``MCLE``: column headings for a category-by-category
    table, which has no room for six full names at 1280 px. The names themselves are used when
    two of them would share initials."""
    initials = ["".join(w[0].upper() for w in re.split(r"[\s\-_/]+", n) if w) or n
                for n in names]
    return initials if len(set(initials)) == len(initials) else list(names)


def category_label(taxonomy: Taxonomy, key: str | None) -> str:
    """Display name of a stored category key; unknown keys (older taxonomies) shown as is."""
    if not key:
        return "—"
    if key in taxonomy:
        return taxonomy.category(key).name
    return key
