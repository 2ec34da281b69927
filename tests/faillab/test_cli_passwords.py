"""`faillab users add` and `faillab users passwd`: a password policy (NIST 800-63B: at least 8
characters, not a common password, not the user's name) and a way to change a password."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from faillab_core.settings import Settings
from labeling.store import Store, open_store


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=stdin, env={"FAILLAB_DATABASE_URL": ""})
    return result.exit_code, result.stdout, result.stderr


def store_of(ws: Path) -> Store:
    return open_store(Settings.from_env({}, workspace=ws).annotations_url())


@pytest.mark.parametrize(("password", "why"), [
    ("short", "too short: at least 8 characters, 5 given"),
    ("1234567", "too short"),
    ("password", "most common passwords"),
    ("PassWord123", "most common passwords"),
    ("zzzzzzzzzz", "one character repeated"),
    ("Shorty Long", "the user's name"),
])
def test_users_add_refuses_a_weak_password_in_one_line(tmp_path: Path, password: str,
                                                       why: str) -> None:
    ws = tmp_path / "ws"
    code, out, err = invoke("users", "add", "shorty long", "--workspace", str(ws),
                            stdin=password + "\n")
    assert code == 1, out
    assert len(err.strip().splitlines()) == 1 and why in err and "Traceback" not in err
    store = store_of(ws)
    try:
        assert store.users.all() == []  # nothing was created
    finally:
        store.close()


def test_users_add_takes_a_long_pass_phrase(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, _, err = invoke("users", "add", "ana", "--workspace", str(ws),
                          stdin="  eight ch  \n")  # spaces count, and are kept
    assert code == 0, err
    store = store_of(ws)
    try:
        assert store.users.verify_password("ana", "  eight ch  ") is not None
    finally:
        store.close()


def test_users_passwd_changes_the_password_and_ends_sessions(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, _, err = invoke("users", "add", "ana", "--workspace", str(ws),
                          stdin="first pass phrase\n")
    assert code == 0, err
    store = store_of(ws)
    try:
        tokens = [store.sessions.create("ana", timedelta(hours=1)) for _ in range(2)]
    finally:
        store.close()
    code, out, err = invoke("users", "passwd", "ana", "--workspace", str(ws),
                            stdin="second pass phrase\n")
    assert code == 0, err
    assert out.strip() == "changed the password of ana; ended 2 session(s)"
    store = store_of(ws)
    try:
        assert store.users.verify_password("ana", "first pass phrase") is None
        assert store.users.verify_password("ana", "second pass phrase") is not None
        assert all(store.sessions.user(t) is None for t in tokens)
        kept = store.sessions.create("ana", timedelta(hours=1))
    finally:
        store.close()
    code, out, err = invoke("users", "passwd", "ana", "--keep-sessions", "--workspace", str(ws),
                            stdin="third pass phrase\n")
    assert code == 0 and out.strip() == "changed the password of ana", err
    store = store_of(ws)
    try:
        assert store.sessions.user(kept) is not None
        assert store.users.verify_password("ana", "third pass phrase") is not None
    finally:
        store.close()


def test_users_passwd_refusals_are_one_line_and_change_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, _, err = invoke("users", "add", "ana", "--workspace", str(ws),
                          stdin="first pass phrase\n")
    assert code == 0, err
    for args, stdin, why in [
        (["nobody"], "a fine pass phrase\n", "unknown user 'nobody'"),
        (["ana"], "short\n", "too short"),
        (["ana"], "12345678\n", "most common passwords"),
        (["ana"], "\n", "password is empty"),
    ]:
        code, _, err = invoke("users", "passwd", *args, "--workspace", str(ws), stdin=stdin)
        assert code == 1 and len(err.strip().splitlines()) == 1 and why in err, (args, err)
    store = store_of(ws)
    try:
        assert store.users.verify_password("ana", "first pass phrase") is not None
    finally:
        store.close()


def test_the_store_applies_the_policy_whoever_calls_it(tmp_path: Path) -> None:
    from labeling.store.users import PasswordPolicyError, check_password

    store = open_store(f"sqlite:///{tmp_path / 'a.sqlite'}")
    try:
        with pytest.raises(PasswordPolicyError, match="too short"):
            store.users.add("ana", password="seven77")
        store.users.add("ana", password="eight888")
        with pytest.raises(PasswordPolicyError, match="common"):
            store.users.set_password("ana", "iloveyou")
        assert store.users.verify_password("ana", "eight888") is not None
    finally:
        store.close()
    check_password("ünïcödé!")  # eight characters, counted as characters, not bytes
    with pytest.raises(PasswordPolicyError):
        check_password("ünïcöd")
