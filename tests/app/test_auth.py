"""Password sign-in: users made with the store (as `faillab users add` does) sign in through the
form in the main area; a wrong password is refused."""

from __future__ import annotations

import itertools
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import pytest
from argon2 import PasswordHasher
from click.testing import CliRunner
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from faillab.cli import main
from labeling.store import open_store
from labeling.store.sessions import ThrottleRule
from labeling.store.users import SignInBusyError
from tests.support import REPO


@pytest.fixture
def password_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = open_store(f"sqlite:///{ws / 'annotations.sqlite'}")
    store.users.add("lena", "lead", password="correct horse")
    store.close()
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "password")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    at.switch_page("views/adjudicate.py").run()
    return at


def test_wrong_password_is_refused(password_app: AppTest) -> None:
    at = password_app
    assert not at.sidebar.text_input  # the form is in the main area, not the sidebar
    at.text_input(key="login_name").input("lena")
    at.text_input(key="login_password").input("wrong")
    at.button(key="login_submit").click().run()
    assert any("wrong password" in e.value for e in at.error)
    assert not any("Signed in as" in c.value for c in at.sidebar.caption)


def test_right_password_signs_in_with_the_stored_role(password_app: AppTest) -> None:
    at = password_app
    at.text_input(key="login_name").input("lena")
    at.text_input(key="login_password").input("correct horse")
    at.button(key="login_submit").click().run()
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
    assert [t.value for t in at.title] == ["EHR Failure Lab"]  # the page waits for a person
    at.button(key="oidc_login").click().run()
    assert not at.exception
    # No [auth] section in secrets here: a clear message instead of a crash.
    assert any("Single sign-on is not configured" in e.value for e in at.error)


def sign_in(at: AppTest, name: str, password: str) -> AppTest:
    at.text_input(key="login_name").input(name)
    at.text_input(key="login_password").input(password)
    at.button(key="login_submit").click().run()
    return at


def test_no_page_runs_before_sign_in(password_app: AppTest) -> None:
    at = password_app
    # The gate stops the run before the page: no page title, only the sign-in prompt.
    assert [t.value for t in at.title] == ["EHR Failure Lab"]
    at.switch_page("views/browse.py").run()
    assert [t.value for t in at.title] == ["EHR Failure Lab"]
    assert not at.dataframe


def test_session_token_is_stored_hashed_and_sign_out_revokes_it(password_app: AppTest,
                                                                tmp_path: Path) -> None:
    at = sign_in(password_app, "lena", "correct horse")
    token = at.session_state["auth_token"]
    store = open_store(f"sqlite:///{tmp_path / 'ws' / 'annotations.sqlite'}")
    try:
        user = store.sessions.user(token)
        assert user is not None and user.name == "lena"
        with store.engine.connect() as s:  # only the hash is kept
            assert token not in str(s.execute(text("SELECT token_hash FROM auth_sessions")).all())
        at.sidebar.button(key="sign_out").click().run()
        assert store.sessions.user(token) is None
        assert not any("Signed in as" in c.value for c in at.sidebar.caption)
    finally:
        store.close()


def test_sessions_expire_and_users_revoke_ends_them(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'a.sqlite'}")
    try:
        store.users.add("ann", "annotator", password="ann password")
        start = datetime.now(UTC)
        token = store.sessions.create("ann", timedelta(hours=1), now=start)
        assert store.sessions.user(token, now=start + timedelta(minutes=59)) is not None
        assert store.sessions.user(token, now=start + timedelta(minutes=61)) is None
        other = store.sessions.create("ann", timedelta(hours=1))
        assert store.sessions.revoke_all("ann") == 2
        assert store.sessions.user(other) is None
        assert store.sessions.user("not-a-token") is None
    finally:
        store.close()


def test_throttling_backs_off_per_user_and_per_client(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'a.sqlite'}")
    rule = ThrottleRule(free_attempts=3, base_s=2, max_s=60)
    now = datetime.now(UTC)
    try:
        keys = ["user:ann", "client:10.0.0.1"]
        for _ in range(2):
            store.sessions.record_failure(keys, rule, now=now)
        assert store.sessions.locked_until(keys, now=now) is None  # still free attempts
        store.sessions.record_failure(keys, rule, now=now)  # 3rd failure: locked 2 s
        assert store.sessions.locked_until(["user:ann"], now=now) == now + timedelta(seconds=2)
        assert store.sessions.locked_until(["client:10.0.0.1"], now=now) is not None
        assert store.sessions.locked_until(["user:bob", "client:10.0.0.2"], now=now) is None
        store.sessions.record_failure(keys, rule, now=now)  # 4th: doubled
        assert store.sessions.locked_until(keys, now=now) == now + timedelta(seconds=4)
        assert store.sessions.failures("user:ann") == 4
        assert [rule.lock_seconds(n) for n in (2, 3, 4, 5, 20)] == [0, 2, 4, 8, 60]
        store.sessions.clear_failures(["user:ann"])
        assert store.sessions.failures("user:ann") == 0
        assert store.sessions.failures("client:10.0.0.1") == 4
    finally:
        store.close()


def test_sign_in_form_refuses_after_repeated_failures(password_app: AppTest,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_SIGNIN_FREE_ATTEMPTS", "2")
    at = password_app
    for _ in range(2):
        sign_in(at, "lena", "wrong")
    sign_in(at, "lena", "correct horse")  # right password, but locked out for now
    assert any("Too many failed sign-ins" in e.value for e in at.error)
    assert not any("Signed in as" in c.value for c in at.sidebar.caption)


def test_unknown_names_cost_a_real_hash_check(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import labeling.store.users as users_mod

    store = open_store(f"sqlite:///{tmp_path / 'a.sqlite'}")
    calls: list[str] = []

    class CountingHasher(PasswordHasher):
        def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
            calls.append(str(hash))
            return super().verify(hash, password)

    monkeypatch.setattr(users_mod, "_hasher", CountingHasher())
    try:
        store.users.add("ann", "annotator", password="ann password")
        assert store.users.verify_password("nobody", "ann password") is None
        assert store.users.verify_password("ann", "bad") is None
        assert len(calls) == 2 and calls[0] == users_mod._DUMMY_HASH
    finally:
        store.close()


def test_password_checks_are_bounded() -> None:
    import labeling.store.users as users_mod

    users_mod.set_password_check_concurrency(1)
    try:
        users_mod._hash_slots.acquire()  # one check in flight
        with pytest.raises(SignInBusyError):
            users_mod._verify(users_mod._DUMMY_HASH, "x", wait_s=0.05)
        users_mod._hash_slots.release()
        assert users_mod._verify(users_mod._DUMMY_HASH, "not a real password") is True
    finally:
        users_mod.set_password_check_concurrency(2)


def test_local_mode_identity_is_chosen_once_and_never_stores_a_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_AUTH", "none")
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    at.sidebar.text_input(key="identity_input").input("ann1")
    assert not open_store(f"sqlite:///{ws / 'annotations.sqlite'}").users.all()  # typing alone
    at.sidebar.button[0].click().run()
    assert any("Signed in as ann1 (annotator)" in c.value for c in at.sidebar.caption)
    assert not at.sidebar.text_input  # the name box is gone: shortcut keys cannot reach it
    assert not at.sidebar.selectbox  # no role selector
    at.switch_page("views/annotate.py").run()
    assert any("Signed in as ann1 (annotator)" in c.value for c in at.sidebar.caption)
    store = open_store(f"sqlite:///{ws / 'annotations.sqlite'}")
    try:
        assert [(u.name, u.role) for u in store.users.all()] == [("ann1", "annotator")]
    finally:
        store.close()


def test_serve_refuses_the_network_without_sign_in(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_AUTH", "none")
    result = CliRunner().invoke(main, ["serve", "--workspace", str(tmp_path / "ws"),
                                       "--host", "0.0.0.0"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "refusing to listen on 0.0.0.0 with auth none" in lines[0]


def test_serve_defaults_to_loopback_and_passes_the_project_settings() -> None:
    from faillab.cli.commands import is_loopback, serve_command
    from faillab_core.settings import Settings

    assert Settings.from_env({}).host == "127.0.0.1"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")
    cmd = serve_command(REPO / "app" / "main.py", "127.0.0.1", 8600, True)
    flags = dict(itertools.pairwise(cmd))
    assert flags["--server.address"] == "127.0.0.1"
    assert flags["--browser.gatherUsageStats"] == "false"
    assert flags["--client.showErrorDetails"] == "none"
    # Per-run costs the app does not need (no page uses magic).
    assert flags["--runner.postScriptGC"] == "false"
    assert flags["--runner.magicEnabled"] == "false"
    # Every setting of the project's .streamlit/config.toml goes with it: Streamlit reads that
    # file only from the directory it is started in (the theme was lost from anywhere else).
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    for section, values in config.items():
        for key, value in values.items():
            expected = str(value).lower() if isinstance(value, bool) else str(value)
            assert flags[f"--{section}.{key}"] == expected, (section, key)
