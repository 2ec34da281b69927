"""The Pre-label page's OpenAI-compatible choice (Streamlit AppTest): the server it names, the
privacy notice, and when the Start button needs the acknowledgement. Nothing is sent: these
tests do not start a run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from faillab_core.settings import Settings
from labeling.store import open_store
from tests.support import REPO

PAGE = str(REPO / "app" / "views" / "prelabel.py")


@pytest.fixture
def ws_dir(demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[Path]:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(root))
    monkeypatch.setenv("FAILLAB_AUTH", "none")
    monkeypatch.delenv("FAILLAB_DATABASE_URL", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    for name in ("FAILLAB_OPENAI_BASE_URL", "FAILLAB_OPENAI_MODEL", "FAILLAB_OPENAI_OWN_HOSTS",
                 "FAILLAB_OPENAI_PRICE_PER_MTOK"):
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield root
    st.cache_resource.clear()
    st.cache_data.clear()


def lead_page() -> AppTest:
    store = open_store(Settings.from_env().annotations_url())
    store.users.ensure("lea", "annotator")
    store.users.set_role("lea", "lead")
    store.close()
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["identity_name"] = "lea"
    at.run()
    assert not at.exception, at.exception
    at.radio(key="prelabel_labeller").set_value("openai-compatible").run()
    assert not at.exception, at.exception
    return at


def texts(elements: object) -> str:
    return " ".join(e.value for e in elements)  # type: ignore[attr-defined]


def test_a_local_server_is_named_and_needs_no_acknowledgement(
        ws_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("FAILLAB_OPENAI_MODEL", "qwen-local")
    at = lead_page()
    assert at.text_input(key="prelabel_openai-compatible_model").value == "qwen-local"
    assert "http://127.0.0.1:8000/v1" in texts(at.caption)
    assert not at.warning
    assert "local or private address" in texts(at.info)
    assert not _has_ack(at)  # nothing to acknowledge
    assert not at.button(key="prelabel_start").disabled
    assert not at.number_input(key="prelabel_concurrency").disabled


def test_a_remote_server_warns_and_waits_for_the_acknowledgement(
        ws_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_OPENAI_BASE_URL", "https://res.example.com/openai/v1/")
    monkeypatch.setenv("FAILLAB_OPENAI_MODEL", "gpt-4o-mini")
    at = lead_page()
    warning = texts(at.warning)
    assert "PhysioNet" in warning and "NOT a local or private address" in warning
    assert at.button(key="prelabel_start").disabled
    at.checkbox(key="prelabel_ack").check().run()
    assert not at.exception
    assert not at.button(key="prelabel_start").disabled


def test_no_server_configured_says_which_setting(ws_dir: Path) -> None:
    at = lead_page()
    assert "FAILLAB_OPENAI_BASE_URL" in texts(at.error)


def _has_ack(at: AppTest) -> bool:
    return any(c.key == "prelabel_ack" for c in at.checkbox)


@pytest.mark.parametrize("url", ["http://10.0.0.1%2f.evil.com/v1",
                                 "http://192.168.1.1%25.attacker.example/v1",
                                 "http://127.0.0.1@evil.example/v1"])
def test_a_hostile_address_is_refused_and_offers_no_start(
        ws_dir: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    # Once called "a local or private address" with Start enabled and no consent box.
    monkeypatch.setenv("FAILLAB_OPENAI_BASE_URL", url)
    monkeypatch.setenv("FAILLAB_OPENAI_MODEL", "m")
    at = lead_page()
    assert "server address" in texts(at.error)
    assert "local or private address" not in texts(at.info)
    assert not [b for b in at.button if b.key == "prelabel_start"]
