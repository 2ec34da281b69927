"""Page-level keyboard and scroll behaviour Streamlit has no API for.

A component without markup runs a small script in the page itself (Streamlit's components v2:
no iframe; the deprecated ``components.v1.html`` loaded one per session). It watches for a new
item (the container keyed ``annotate_item_<id>`` around the question) and then scrolls the page
and the steps pane to the top (the next item starts at its question); it takes the focus off a
clicked button (shortcut keys pressed on a focused button do nothing); Ctrl+Enter (or
Escape) in a text box commits the text and leaves the box, so the single-key shortcuts work
again without reaching for the mouse. (``[``/``]`` no longer move the step cursor: they mean
"previous/next item" on every page, J/K "previous/next step"; see ``keymap``.)

The component stays mounted while the page shows an item (same key on every run), so the
script runs once per visit, not once per item; when it unmounts it removes its listeners, and
a new mount replaces any an earlier one left behind.
"""

from __future__ import annotations

import streamlit as st

ITEM_KEY_PREFIX = "annotate_item_"

_SCRIPT = """
export default function () {
  const top = window;
  const doc = document;
  const old = top.__faillabPageKeys;
  if (old) {
    old.observer.disconnect();
    doc.removeEventListener('click', old.onClick, true);
    doc.removeEventListener('keydown', old.onKey, true);
  }
  function toTop() {
    for (const sel of ['[data-testid="stMain"]', '[data-testid="stAppViewContainer"]',
                       'section.main']) {
      const el = doc.querySelector(sel);
      if (el) { el.scrollTop = 0; }
    }
    top.scrollTo(0, 0);
    const pane = doc.querySelector('.st-key-annotate_steps_pane');
    if (pane) {
      const inner = pane.querySelector('[data-testid="stVerticalBlock"]') || pane;
      pane.scrollTop = 0; inner.scrollTop = 0;
    }
    const active = doc.activeElement;
    if (active && active.tagName === 'BUTTON') { active.blur(); }
  }
  function itemToken() {
    const el = doc.querySelector('[class*="st-key-__PREFIX__"]');
    if (!el) { return null; }
    for (const c of el.classList) { if (c.indexOf('st-key-__PREFIX__') === 0) { return c; } }
    return null;
  }
  let pending = false;
  const observer = new MutationObserver(function () {
    if (pending) { return; }
    pending = true;
    top.requestAnimationFrame(function () {
      pending = false;
      const token = itemToken();
      // Scroll only when the item changed, not on every rerun of the same item.
      if (token && top.__faillabScrollToken !== token) {
        top.__faillabScrollToken = token;
        toTop();
      }
    });
  });
  observer.observe(doc.body, {childList: true, subtree: true});
  const first = itemToken();
  if (first && top.__faillabScrollToken !== first) { top.__faillabScrollToken = first; toTop(); }
  function onClick(ev) {
    // A clicked button (Take, a category, Skip) keeps the focus while the next item renders.
    const button = ev.target && ev.target.closest ? ev.target.closest('button') : null;
    if (button && button.closest('[class*="st-key-annotate_"], [class*="st-key-lf_"]')) {
      setTimeout(function () { button.blur(); }, 0);
    }
  }
  function onKey(ev) {
    const el = ev.target;
    if (!el || el.tagName !== 'TEXTAREA') { return; }
    const commit = (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) || ev.key === 'Escape';
    // Streamlit commits the text on Ctrl+Enter itself; leaving the box afterwards hands the
    // keys back to the page's shortcuts.
    if (commit) { setTimeout(function () { el.blur(); }, 0); }
  }
  doc.addEventListener('click', onClick, true);
  doc.addEventListener('keydown', onKey, true);
  const mine = {observer: observer, onClick: onClick, onKey: onKey};
  top.__faillabPageKeys = mine;
  return function () {
    observer.disconnect();
    doc.removeEventListener('click', onClick, true);
    doc.removeEventListener('keydown', onKey, true);
    if (top.__faillabPageKeys === mine) { top.__faillabPageKeys = null; }
  };
}
""".replace("__PREFIX__", ITEM_KEY_PREFIX)

_CSS = """
<style>
/* The decision screen needs the height Streamlit leaves empty above the first element. */
[data-testid="stMainBlockContainer"] { padding-top: 1.25rem !important; }
/* Tighter rows in the label form, so every control it has fits 1280x800 without scrolling. */
.st-key-annotate_form, .st-key-annotate_form [data-testid="stVerticalBlock"] { gap: 0.5rem; }
/* A long question (a benchmark's whole instruction) shows four lines and opens in place on
   hover or focus; the run line is one line (the whole name is in its help): real runs have
   names of a hundred characters, and the step under the cursor must stay on a 1280x800 screen. */
.st-key-annotate_question [data-testid="stMarkdownContainer"] {
  display: -webkit-box; -webkit-line-clamp: 4; -webkit-box-orient: vertical; overflow: hidden; }
.st-key-annotate_question:hover [data-testid="stMarkdownContainer"],
.st-key-annotate_question:focus-within [data-testid="stMarkdownContainer"] {
  -webkit-line-clamp: unset; overflow: visible; }
.st-key-annotate_meta [data-testid="stCaptionContainer"] p,
.st-key-annotate_steps_pane [data-testid="stCaptionContainer"] p {
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
/* The evidence line and the step bar are one line each; on a screen 800 px high the cursor
   step's code shows six lines (scrolling inside for the rest), so what it returned starts on
   screen too. */
.st-key-annotate_steps_pane [class*="st-key-evidence_"] summary
  [data-testid="stMarkdownContainer"],
.st-key-annotate_step_where [data-testid="stMarkdownContainer"] {
  overflow: hidden; text-overflow: ellipsis; }
.st-key-annotate_steps_pane [class*="st-key-evidence_"] summary
  [data-testid="stMarkdownContainer"] *,
.st-key-annotate_step_where [data-testid="stMarkdownContainer"] * { white-space: nowrap; }
@media (max-height: 860px) {
  .st-key-annotate_steps_pane .st-key-annotate_cursor_step .faillab-code { max-height: 6rem; } }
/* A long category name wraps inside its button at 1280 px instead of ending in "...". */
[class*="st-key-lf_cat_"] button [data-testid="stMarkdownContainer"],
[class*="st-key-lf_cat_"] button p {
  white-space: normal; overflow: visible; text-overflow: clip; line-height: 1.25;
}
</style>
"""


_PAGE_SCRIPT = st.components.v2.component("faillab_page_keys", js=_SCRIPT)


def page_keys() -> None:
    """Install the page script (mounted once, kept across runs by its key) and the CSS."""
    st.html(_CSS)
    _PAGE_SCRIPT(key="faillab_page_keys", height=0)


def item_key(trajectory_id: str) -> str:
    """Key of the container around the item's question: the script's sign of a new item."""
    return ITEM_KEY_PREFIX + "".join(c if c.isalnum() or c in "-_" else "_"
                                     for c in trajectory_id)
