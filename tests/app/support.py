"""Helpers for the page tests that run the app against a workspace of their own."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

#: Settings a developer's shell may hold that would change what the pages show.
_APP_ENV = ("FAILLAB_DATABASE_URL", "FAILLAB_AUTH", "FAILLAB_BLIND", "FAILLAB_HIDE_PRELABEL")


def copy_of(workspace: Path, tmp_path: Path) -> Path:
    """A private copy of ``workspace`` (the session's demo is shared by every test)."""
    root = tmp_path / "ws"
    shutil.copytree(workspace, root)
    return root


def serve_workspace(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the app at ``root`` with default settings (local store, no sign-in, not blind),
    and drop the settings, workspace and store an earlier test cached in this process."""
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    for var in _APP_ENV:
        monkeypatch.delenv(var, raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()


_VERDICT = re.compile(r'<div class="faillab-verdict-label">(.*?)</div>'
                      r'<div class="faillab-verdict-value">(.*?)</div>')


def answer_panel(at: AppTest) -> str:
    """The answer panel's HTML block as the page drew it ("" when there is none)."""
    return next((h.value for h in at.html if 'class="faillab-answer"' in h.value), "")


def verdicts(panel_html: str) -> dict[str, str]:
    """The answer panel's verdicts (label -> shown value), read from its HTML."""
    return {html.unescape(k): html.unescape(v) for k, v in _VERDICT.findall(panel_html)}


def shown_item(at: AppTest) -> str:
    """The trajectory the Annotate page shows, read from its head line ("Item k of N · ... ·
    `id`", or "Changing your label on `id`")."""
    heads = [m.value for m in at.markdown if m.value.startswith(("**Item ", "**Changing"))]
    assert heads, "no item on screen"
    found = re.search(r"`([^`]+)`", heads[0])
    assert found, heads[0]
    return found.group(1)
