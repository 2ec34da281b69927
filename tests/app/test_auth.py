"""Password sign-in: users made with the store (as `faillab users add` does) sign in through the
sidebar form; a wrong password is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labeling.store import open_store
from tests.conftest import REPO


@pytest.fixture
def password_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = open_store(f"sqlite:///{ws / 'annotations.sqlite'}")
    store.add_user("lena", "lead", password="correct horse")
    store.close()
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "password")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    at.switch_page("views/adjudicate.py").run()
    return at


def test_wrong_password_is_refused(password_app: AppTest) -> None:
    at = password_app
    assert any("Sign in" in i.value for i in at.info)
    at.sidebar.text_input(key="login_name").input("lena")
    at.sidebar.text_input(key="login_password").input("wrong")
    at.sidebar.button[0].click().run()
    assert any("wrong password" in e.value for e in at.sidebar.error)
    assert not any("Signed in as" in c.value for c in at.sidebar.caption)


def test_right_password_signs_in_with_the_stored_role(password_app: AppTest) -> None:
    at = password_app
    at.sidebar.text_input(key="login_name").input("lena")
    at.sidebar.text_input(key="login_password").input("correct horse")
    at.sidebar.button[0].click().run()
    assert not at.exception
    assert any("Signed in as lena (lead)" in c.value for c in at.sidebar.caption)
    assert not any("This page is for" in e.value for e in at.error)


def test_oidc_mode_offers_single_sign_on_and_explains_missing_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "oidc")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    at.switch_page("views/annotate.py").run()
    assert any("Sign in" in i.value for i in at.info)  # the page waits for a person
    at.sidebar.button(key="oidc_login").click().run()
    assert not at.exception
    # No [auth] section in secrets here: a clear message instead of a crash.
    assert any("Single sign-on is not configured" in e.value for e in at.sidebar.error)
