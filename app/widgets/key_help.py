"""The keyboard pages' shortcut list: a "Keys" button that opens it in a dialog, and ``?``.

Every page that answers to single keys (Annotate, Trajectory, Adjudicate, the audit review)
calls ``key_help`` with its keys. Streamlit's button shortcuts take letters, digits and named
keys only, so ``?`` is heard by a small page script (a component without markup, as
``page_keys``), which presses the Keys button unless the person is typing in a text box. The
same script can move the focus into a text box after a key (Adjudicate: after "take rater A",
into the reason, where Enter saves), so a keyboard-only decision needs no mouse; it presses a
page's buttons for the punctuation keys Streamlit cannot bind (``[``/``]``: previous/next item,
``clicks``); and on a page that shows every step in one pane (Trajectory) it moves a step
cursor through the pane with J/K (``steps``), so J/K mean "next/previous step" on every page
(``keymap``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from faillab.app.widgets.keymap import HELP
from faillab.app.widgets.safe import escape_markdown

HELP_BUTTON = "faillab_keys_help"

_SCRIPT = """
export default function (component) {
  const data = (component && component.data) || {};
  const doc = document;
  const top = window;
  const old = top.__faillabKeyHelp;
  if (old) { doc.removeEventListener('keydown', old.onKey, true); }
  function typing(el) {
    return el && (el.tagName === 'TEXTAREA' || el.tagName === 'INPUT' ||
                  el.isContentEditable);
  }
  const focusKeys = (data.focus_after_keys || []).map(function (k) { return k.toLowerCase(); });
  function focusLater(selector) {
    let tries = 0;
    const timer = setInterval(function () {
      tries += 1;
      const box = doc.querySelector(selector);
      if (box) { box.focus(); clearInterval(timer); } else if (tries > 40) { clearInterval(timer); }
    }, 50);
  }
  const clicks = data.clicks || {};
  const steps = data.steps || null;
  function moveStep(delta) {
    const all = [...doc.querySelectorAll(steps)].filter(function (el) {
      return el.offsetParent !== null; });
    if (!all.length) { return; }
    const state = top.__faillabStepCursor;
    // The shown item is in the URL (?id=...): a new item starts before its first step.
    const token = top.location.search;
    let index = state && state.token === token ? state.index : -1;
    const current = doc.querySelector('.faillab-step-current');
    if (current && all.indexOf(current) >= 0) { index = all.indexOf(current); }
    index = Math.max(0, Math.min(all.length - 1, index + delta));
    if (current) { current.classList.remove('faillab-step-current'); }
    const el = all[index];
    el.classList.add('faillab-step-current');
    // The step to the top of its own scrolling pane; the page itself moves only as far as
    // needed to show it (the question and the answer column stay where they are).
    let box = el.parentElement;
    while (box && box !== doc.body && box.scrollHeight <= box.clientHeight + 1) {
      box = box.parentElement;
    }
    if (box && box !== doc.body) {
      box.scrollTop += el.getBoundingClientRect().top - box.getBoundingClientRect().top - 8;
    }
    el.scrollIntoView({block: 'nearest', behavior: 'auto'});
    top.__faillabStepCursor = {token: token, index: index};
  }
  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) { return; }
    if (Object.prototype.hasOwnProperty.call(clicks, ev.key)) {
      const button = doc.querySelector('.st-key-' + clicks[ev.key] + ' button');
      if (button && !button.disabled) {
        ev.preventDefault();
        button.click();
        setTimeout(function () { button.blur(); }, 0);
      }
      return;
    }
    if (steps && (ev.key === 'j' || ev.key === 'J' || ev.key === 'k' || ev.key === 'K')) {
      ev.preventDefault();
      moveStep(ev.key.toLowerCase() === 'j' ? 1 : -1);
      return;
    }
    if (ev.key === '?') {
      const button = doc.querySelector('.st-key-__HELP__ button');
      if (button) { ev.preventDefault(); button.click(); }
      return;
    }
    if (data.focus && focusKeys.indexOf(ev.key.toLowerCase()) >= 0) {
      // After the button's own shortcut has run (this listener sees the key first).
      setTimeout(function () { focusLater(data.focus); }, 0);
    }
  }
  doc.addEventListener('keydown', onKey, true);
  const mine = {onKey: onKey};
  top.__faillabKeyHelp = mine;
  return function () {
    doc.removeEventListener('keydown', onKey, true);
    if (top.__faillabKeyHelp === mine) { top.__faillabKeyHelp = null; }
  };
}
""".replace("__HELP__", HELP_BUTTON)

#: The step under a J/K cursor on a page that draws every step (Trajectory).
_STEP_CSS = """<style>
.faillab-step.faillab-step-current { outline: 2px solid rgba(28, 131, 225, 0.85);
  outline-offset: 1px; scroll-margin-top: 0.5rem; }
</style>"""

_KEY_SCRIPT = st.components.v2.component("faillab_key_help", js=_SCRIPT)


def keys_table(keys: Sequence[tuple[str, str]]) -> str:
    """The keys as a two-column Markdown table (escaped)."""
    rows = "".join(f"| {escape_markdown(key)} | {escape_markdown(what)} |\n" for key, what in keys)
    return "| Key | What it does |\n|---|---|\n" + rows


@st.dialog("Keyboard shortcuts")
def _dialog(keys: tuple[tuple[str, str], ...]) -> None:
    st.markdown(keys_table(keys))
    st.caption("? opens this list; Escape closes it. Keys do nothing while you type in a box.")


def key_help(keys: Sequence[tuple[str, str]], *, where: DeltaGenerator | None = None,
             focus: str | None = None,
             focus_after_keys: Sequence[str] = (),
             clicks: Mapping[str, str] | None = None,
             steps: str | None = None) -> None:
    """The Keys button (in ``where``, else here) and the ``?`` script; ``focus``: a CSS selector
    of the text box to move into after one of ``focus_after_keys``; ``clicks``: key -> the
    Streamlit key of the button it presses; ``steps``: the CSS selector of the steps, for a J/K
    step cursor over steps drawn in one pane."""
    listed = (*tuple(keys), (HELP, "this list of keys"))
    slot = where if where is not None else st
    if slot.button("Keys", key=HELP_BUTTON, icon=":material/keyboard:", type="tertiary",
                   help="Keyboard shortcuts (?)"):
        _dialog(listed)
    _KEY_SCRIPT(key="faillab_key_help_script", height=0,
                data={"focus": focus, "focus_after_keys": list(focus_after_keys),
                      "clicks": dict(clicks or {}),
                      "steps": steps})
    if steps:
        st.html(_STEP_CSS)
