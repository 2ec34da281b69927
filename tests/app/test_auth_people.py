"""People in the app: a signed-in user changes their own password, lead pages say how to become
a lead, and the session cookie is Secure whenever the browser came over https."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labeling.store import open_store
from tests.support import REPO

OLD = "correct horse"
NEW = "purple staple lamp"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _url(ws: Path) -> str:
    return f"sqlite:///{ws / 'annotations.sqlite'}"


def _signed_in(ws: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    store = open_store(_url(ws))
    store.users.add("lena", "annotator", password=OLD)
    store.close()
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "password")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    at.text_input(key="login_name").input("lena")
    at.text_input(key="login_password").input(OLD)
    at.button(key="login_submit").click().run()
    assert any("Signed in as lena" in c.value for c in at.sidebar.caption)
    return at


def _change(at: AppTest, current: str, new: str, repeat: str | None = None) -> AppTest:
    at.sidebar.text_input(key="pw_current").input(current)
    at.sidebar.text_input(key="pw_new").input(new)
    at.sidebar.text_input(key="pw_repeat").input(new if repeat is None else repeat)
    at.sidebar.button(key="pw_submit").click().run()
    return at


def test_signed_in_user_changes_their_password(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _signed_in(ws, monkeypatch)
    store = open_store(_url(ws))
    try:
        elsewhere = store.sessions.create("lena", timedelta(hours=1))  # another browser
        _change(at, "not my password", NEW)
        assert any("current password is wrong" in e.value for e in at.sidebar.error)
        _change(at, OLD, "short")
        assert any("too short: at least 8 characters" in e.value for e in at.sidebar.error)
        _change(at, OLD, "password123")
        assert any("most common passwords" in e.value for e in at.sidebar.error)
        _change(at, OLD, NEW, repeat=NEW + "x")
        assert any("new passwords differ" in e.value for e in at.sidebar.error)
        assert store.users.verify_password("lena", OLD) is not None  # nothing changed so far

        _change(at, OLD, NEW)
        assert not at.exception
        assert any("Password changed" in m.value for m in at.sidebar.success)
        assert store.users.verify_password("lena", OLD) is None
        assert store.users.verify_password("lena", NEW) is not None
        # The other browser is signed out; this one stays signed in.
        assert store.sessions.user(elsewhere) is None
        assert store.sessions.user(at.session_state["auth_token"]) is not None
        at.run()
        assert any("Signed in as lena" in c.value for c in at.sidebar.caption)
    finally:
        store.close()


def test_wrong_current_passwords_are_throttled_like_sign_ins(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILLAB_SIGNIN_FREE_ATTEMPTS", "2")
    at = _signed_in(ws, monkeypatch)
    for _ in range(2):
        _change(at, "guess", NEW)
    _change(at, OLD, NEW)  # the right one, but the name is locked for now
    assert any("Too many failed sign-ins" in e.value for e in at.sidebar.error)
    store = open_store(_url(ws))
    try:
        assert store.users.verify_password("lena", NEW) is None
    finally:
        store.close()


def test_local_mode_lead_page_says_how_to_become_a_lead(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "none")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    at.sidebar.text_input(key="identity_input").input("ann 1")
    at.sidebar.button[0].click().run()
    at.switch_page("views/adjudicate.py").run()
    assert any("This page is for leads or admins" in e.value for e in at.error)
    [how] = [i.value for i in at.info]
    assert f"faillab users role 'ann 1' lead --workspace {ws}" in how and "Local mode" in how


def test_anonymous_local_visitor_is_told_where_to_choose_a_name(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "none")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    at.switch_page("views/annotate.py").run()
    assert [i.value for i in at.info] == [
        "Choose your name in the sidebar (“Your name”) to use this page."]


@pytest.mark.parametrize(("url", "headers", "https"), [
    ("https://lab.example/annotate", {}, True),
    ("http://127.0.0.1:8501/", {}, False),
    (None, {}, False),
    # The page address is not sent with every run; the WebSocket's Origin always is.
    (None, {"Origin": "https://lab.example"}, True),
    (None, {"Origin": "http://lab.example"}, False),
    # A TLS-terminating proxy in front of a plain-http server.
    ("http://lab.internal:8501/", {"X-Forwarded-Proto": "https"}, True),
    ("http://lab.internal:8501/", {"x-forwarded-proto": "https, http"}, True),
    ("http://lab.internal:8501/", {"X-Forwarded-Proto": "http"}, False),
    ("http://lab.internal:8501/", {"Forwarded": 'for=10.0.0.1;proto="https";host=lab'}, True),
    ("http://lab.internal:8501/", {"Forwarded": "for=10.0.0.1;proto=http"}, False),
])
def test_cookie_is_secure_whenever_the_browser_came_over_https(
    url: str | None, headers: dict[str, str], https: bool
) -> None:
    from faillab.app.auth import served_over_https

    assert served_over_https(url, headers) is https
