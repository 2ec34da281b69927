"""Page-level keyboard and scroll behaviour Streamlit has no API for.

A zero-height component runs a small script in the page: it scrolls the page to the top when
`scroll_token` changes (the next item starts at its question) and takes the focus off a clicked
button (so the keys work at once on the next item), and lets Ctrl+Enter (or Escape)
in a text box commit the text and leave the box, so the page's single-key shortcuts work again
without reaching for the mouse.
"""

from __future__ import annotations

import json

import streamlit as st
import streamlit.components.v1 as components

_SCRIPT = """
<script>
(function () {
  const doc = window.parent.document;
  const token = %s;
  // Scroll only when the item changed, not on every rerun of the same item.
  if (window.parent.__faillabScrollToken !== token) {
    window.parent.__faillabScrollToken = token;
    for (const sel of ['[data-testid="stMain"]', '[data-testid="stAppViewContainer"]',
                       'section.main']) {
      const el = doc.querySelector(sel);
      if (el) { el.scrollTop = 0; }
    }
    window.parent.scrollTo(0, 0);
    // Belt and braces for the click handler below (installed once per browser tab).
    const active = doc.activeElement;
    if (active && active.tagName === 'BUTTON') { active.blur(); }
    const pane = doc.querySelector('.st-key-annotate_steps_pane');
    if (pane) {
      const inner = pane.querySelector('[data-testid="stVerticalBlock"]') || pane;
      pane.scrollTop = 0; inner.scrollTop = 0;
    }
  }
  if (!window.parent.__faillabKeys) {
    window.parent.__faillabKeys = true;
    // A clicked button (Take, a category, Skip) keeps the focus while the next item renders,
    // and shortcut keys pressed on a focused button do nothing: let go of it at once.
    doc.addEventListener('click', function (ev) {
      const button = ev.target && ev.target.closest ? ev.target.closest('button') : null;
      if (button && button.closest('[class*="st-key-annotate_"], [class*="st-key-lf_"]')) {
        setTimeout(function () { button.blur(); }, 0);
      }
    }, true);
    doc.addEventListener('keydown', function (ev) {
      const el = ev.target;
      if (!el || el.tagName !== 'TEXTAREA') { return; }
      const commit = (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) || ev.key === 'Escape';
      // Streamlit commits the text on Ctrl+Enter itself; leaving the box afterwards hands the
      // keys back to the page's shortcuts.
      if (commit) { setTimeout(function () { el.blur(); }, 0); }
    }, true);
  }
})();
</script>
"""

_CSS = """
<style>
.st-key-annotate_undo_z { display: none; }
/* The decision screen needs the height Streamlit leaves empty above the first element. */
[data-testid="stMainBlockContainer"] { padding-top: 1.25rem !important; }
/* Tighter rows in the label form, so every control it has fits 1280x800 without scrolling. */
.st-key-annotate_form, .st-key-annotate_form [data-testid="stVerticalBlock"] { gap: 0.5rem; }
</style>
"""


def page_keys(*, scroll_token: str) -> None:
    st.html(_CSS)
    components.html(_SCRIPT % json.dumps(scroll_token), height=0)
