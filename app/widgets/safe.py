"""Show untrusted text (questions, messages, observations) without letting it become markup.

Streamlit never renders raw HTML unless ``unsafe_allow_html`` is set (it is never set in this
app), but Markdown itself can still create links and remote images from data. Every ASCII
punctuation character is backslash-escaped, so data always shows as the literal text it is.
"""

from __future__ import annotations

import string

import streamlit as st

_ESCAPE = {ord(c): "\\" + c for c in string.punctuation}


def escape_markdown(text: str) -> str:
    return text.translate(_ESCAPE)


def plain(text: str | None, *, caption: bool = False) -> None:
    """Render data as literal text with normal wrapping."""
    body = escape_markdown(text or "")
    if caption:
        st.caption(body)
    else:
        st.markdown(body)
