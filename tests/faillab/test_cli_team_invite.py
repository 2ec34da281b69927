"""`faillab team --invite`: one-time invitation links instead of printed passwords, on SQLite
and PostgreSQL. A link's token is stored hashed, signs its person's password in once, a second
run sends a new link only to those who still have no password (the old one stops working), and
invitations are refused where sign-in is not by password."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from faillab.cli import main
from labeling.store import open_store
from labeling.store.invitations import InvitationError
from tests.store_fixtures import db_url, postgres_database  # noqa: F401 - fixtures by name

PEOPLE = "name,role\nlea,lead\nana\nben\n"


@pytest.fixture
def ws(demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
       db_url: str) -> Path:  # noqa: F811 - the fixture imported above
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    monkeypatch.delenv("FAILLAB_WORKSPACE", raising=False)
    monkeypatch.setenv("FAILLAB_DATABASE_URL", db_url)
    monkeypatch.setenv("FAILLAB_AUTH", "password")
    return root


def _team(ws: Path, people: str, *extra: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["team", "-", "--workspace", str(ws), "--json", *extra],
                                input=people)
    assert result.exit_code == 0, result.stderr
    value: dict[str, object] = json.loads(result.stdout)
    return value


def _token(link: str) -> str:
    return parse_qs(urlsplit(link).query)["invite"][0]


def test_invitation_links_instead_of_passwords(ws: Path, db_url: str) -> None:  # noqa: F811
    report = _team(ws, PEOPLE, "--invite", "--url", "http://team.example:8600/")
    people = {p["name"]: p for p in report["people"]}  # type: ignore[attr-defined]
    assert report["invite_days"] == 7
    assert all(p["password"] is None for p in people.values())
    links = {n: str(p["invite"]) for n, p in people.items()}
    assert all(link.startswith("http://team.example:8600/?invite=") for link in links.values())
    assert len(set(links.values())) == 3
    assert people["ana"]["assigned"] > 0  # the work is assigned as without --invite
    store = open_store(db_url)
    try:
        with store.engine.connect() as conn:
            stored = "\n".join(conn.execute(text("SELECT token_hash FROM invitations")).scalars())
        assert all(_token(link) not in stored for link in links.values())  # hashed only
        assert store.users.verify_password("ana", "") is None
        assert store.invitations.redeem(_token(links["ana"]), "ana's own phrase").name == "ana"
        assert store.users.verify_password("ana", "ana's own phrase") is not None
        with pytest.raises(InvitationError):  # once
            store.invitations.redeem(_token(links["ana"]), "another phrase here")
    finally:
        store.close()

    # Again: ana has a password (no link); ben and lea get new links, their old ones stop.
    again = _team(ws, PEOPLE, "--invite")
    second = {p["name"]: p["invite"] for p in again["people"]}  # type: ignore[attr-defined]
    assert second["ana"] is None and second["ben"] and second["lea"]
    assert str(second["ben"]).startswith("http://localhost:8501/?invite=")
    store = open_store(db_url)
    try:
        assert store.invitations.name_for(_token(links["ben"])) is None
        assert store.invitations.name_for(_token(str(second["ben"]))) == "ben"
        assert set(store.invitations.pending()) == {"ben", "lea"}
    finally:
        store.close()


def test_the_text_output_prints_each_link_once(ws: Path) -> None:
    result = CliRunner().invoke(main, ["team", "-", "--workspace", str(ws), "--invite",
                                       "--invite-days", "2"], input="ana\nben\n")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == ["ana", "ben"]
    assert all(ln.split()[-1].startswith("http://localhost:8501/?invite=") for ln in lines)
    assert "works once, for 2 days" in result.stderr and "shown once" not in result.stderr


@pytest.mark.parametrize(("auth", "extra", "said"), [
    ("none", (), "--invite is for password sign-in"),
    ("password", ("--no-passwords",), "contradict"),
])
def test_invitations_only_where_sign_in_is_by_password(
        ws: Path, monkeypatch: pytest.MonkeyPatch, auth: str, extra: tuple[str, ...],
        said: str) -> None:
    monkeypatch.setenv("FAILLAB_AUTH", auth)
    result = CliRunner().invoke(main, ["team", "-", "--workspace", str(ws), "--invite", *extra],
                                input="ana\n")
    assert result.exit_code != 0 and said in result.stderr
