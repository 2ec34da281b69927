"""An invitation link (``/?invite=TOKEN``, from ``faillab team --invite``) opens a form where its
person sets their password and is signed in; the link then works no more, a refused password
leaves it usable, and a dead link says so above the ordinary sign-in form."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labeling.store import Store, open_store
from tests.support import REPO


@pytest.fixture
def invited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, str]:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = open_store(f"sqlite:///{ws / 'annotations.sqlite'}")
    store.users.add("ana", "annotator")
    token = store.invitations.create("ana")
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "password")
    monkeypatch.delenv("FAILLAB_DATABASE_URL", raising=False)
    return store, token


def _open(token: str) -> AppTest:
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60)
    at.query_params["invite"] = token
    return at.run()


def _set(at: AppTest, password: str, repeat: str | None = None) -> AppTest:
    at.text_input(key="invite_password").input(password)
    at.text_input(key="invite_repeat").input(password if repeat is None else repeat)
    return at.button(key="invite_submit").click().run()


def test_the_invited_person_sets_a_password_and_is_signed_in(invited: tuple[Store, str]) -> None:
    store, token = invited
    at = _open(token)
    assert any("Welcome, ana." in m.value for m in at.markdown)
    assert not any("Signed in as" in c.value for c in at.sidebar.caption)
    _set(at, "a long pass phrase", "a different phrase")
    assert any("differ" in e.value for e in at.error)
    _set(at, "short")
    assert any(e.value.startswith("Not set: the password is too short") for e in at.error)
    assert store.invitations.name_for(token) == "ana"  # still usable
    _set(at, "a long pass phrase")
    assert not at.exception
    assert any("Signed in as ana (annotator)" in c.value for c in at.sidebar.caption)
    assert "invite" not in at.query_params
    assert store.users.verify_password("ana", "a long pass phrase") is not None
    assert store.invitations.name_for(token) is None

    # The same link again: spent, said above the ordinary sign-in form.
    again = _open(token)
    assert any("unknown, already used or expired" in e.value for e in again.error)
    assert again.text_input(key="login_name") is not None
    assert not any("Welcome" in m.value for m in again.markdown)
    store.close()
