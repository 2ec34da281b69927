"""Show untrusted text (questions, messages, observations) without letting it become markup.

Streamlit never renders raw HTML unless ``unsafe_allow_html`` is set (it is never set in this
app), but Markdown itself can still create links and remote images from data. Every ASCII
punctuation character is backslash-escaped, so data always shows as the literal text it is.

The pages' light HTML blocks (``st.html``: steps, the answer diff) are built from the helpers
here too, so every piece of data placed in markup goes through one escaping function.
"""

from __future__ import annotations

import html
import string
from typing import Any

import streamlit as st

_ESCAPE = {ord(c): "\\" + c for c in string.punctuation}


def escape_markdown(text: str) -> str:
    return text.translate(_ESCAPE)


#: The Markdown a prose answer keeps: emphasis, lists, headings, tables, code spans, quotes.
#: Everything else is escaped: no link or image (``[``, ``!``), no HTML (``<``, ``&``), none of
#: Streamlit's additions (``:red[...]``, ``:material/...:``, ``$...$`` maths).
_MARKDOWN_KEPT = "*_-#|`.+>()"
_ESCAPE_BUT_STRUCTURE = {ord(c): "\\" + c for c in string.punctuation if c not in _MARKDOWN_KEPT}


def safe_markdown(text: str) -> str:
    """Data as Markdown that renders its structure (a model's ``* **Patient ID:** 7`` as a
    bulleted, bold line) but can create no link, image, HTML or Streamlit directive."""
    return text.translate(_ESCAPE_BUT_STRUCTURE)


def plain(text: str | None, *, caption: bool = False) -> None:
    """Render data as literal text with normal wrapping."""
    body = escape_markdown(text or "")
    if caption:
        st.caption(body)
    else:
        st.markdown(body)


def escape_html(text: object) -> str:
    """Data as HTML text: every markup character escaped, quotes included."""
    return html.escape(str(text), quote=True)


def cell_html(value: Any) -> str:
    """A table cell's content: the value escaped, a missing one shown as ``null``."""
    if value is None:
        return '<span class="faillab-null">null</span>'
    return escape_html(value)


def table_html(columns: list[str], rows: list[list[Any]], max_height_px: int = 320) -> str:
    """A small table as HTML (header and cells escaped), scrolling past ``max_height_px``."""
    head = "".join(f"<th>{escape_html(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell_html(v)}</td>" for v in row) + "</tr>"
                   for row in rows)
    return (f'<div class="faillab-table-wrap" style="max-height: {int(max_height_px)}px">'
            f'<table class="faillab-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def code_html(text: str, language: str | None = None, max_height_px: int | None = None) -> str:
    """Code or a recorded output as a preformatted block (escaped; styled by the steps' CSS).

    Not ``st.code``: its syntax highlighter is a script of its own that Chromium evaluated on
    every page load that showed one code block (about 0.4 s of CPU a deep link on the 2-core
    machines), for colours. Plain blocks keep the text selectable for copying."""
    lang = f' data-language="{escape_html(language)}"' if language else ""
    cap = f' style="max-height: {int(max_height_px)}px; overflow: auto"' if max_height_px else ""
    return f'<pre class="faillab-code"{lang}{cap}>{escape_html(text)}</pre>'
