"""`faillab team`: people from a list, passwords printed once, assignments with overlap, the
routing in effect, in one command (three `users add`, a lead's form and a restart before)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from faillab_core.settings import Settings
from labeling.store import open_store

PEOPLE = "name,role\nlea,lead\nana\nben,annotator   # second annotator\n\ncem\n"


@pytest.fixture
def ws(demo_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    for var in ("FAILLAB_DATABASE_URL", "FAILLAB_WORKSPACE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FAILLAB_AUTH", "password")
    return root


def _team(ws: Path, people: str, *extra: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["team", "-", "--workspace", str(ws), "--json", *extra],
                                input=people)
    assert result.exit_code == 0, result.stderr
    value: dict[str, object] = json.loads(result.stdout)
    return value


def test_one_command_sets_up_people_passwords_and_overlapping_work(ws: Path) -> None:
    report = _team(ws, PEOPLE)
    people = {p["name"]: p for p in report["people"]}  # type: ignore[attr-defined]
    assert {n: p["role"] for n, p in people.items()} == {
        "lea": "lead", "ana": "annotator", "ben": "annotator", "cem": "annotator"}
    store = open_store(Settings.from_env(workspace=ws).annotations_url())
    try:
        # Each printed password signs its person in; nobody else's does.
        for name, person in people.items():
            assert store.users.verify_password(name, str(person["password"])) is not None
        assert store.users.verify_password("ana", str(people["ben"]["password"])) is None
        assignments = store.queues.assignments()
    finally:
        store.close()
    per_item = Counter(tid for tid, _, _ in assignments)
    # Every failure to one annotator, a share to two (the overlap agreement is measured on),
    # nothing to the lead.
    assert set(per_item.values()) == {1, 2} and {n for _, n, _ in assignments} == {
        "ana", "ben", "cem"}
    assert all(people[n]["assigned"] > 0 for n in ("ana", "ben", "cem"))
    assert report["routing"]["spot_check_share"] == 0.1  # type: ignore[index]

    # Run again: nobody's password is printed a second time or changed, nothing re-assigned.
    again = _team(ws, PEOPLE)
    assert all(p["password"] is None and p["status"] == "kept"
               for p in again["people"])  # type: ignore[attr-defined]
    assert again["new_assignments"] == 0


def test_the_text_output_prints_each_password_once(ws: Path) -> None:
    result = CliRunner().invoke(main, ["team", "-", "--workspace", str(ws)], input="ana\nben\n")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == ["ana", "ben"]
    assert all(len(ln.split()[-1]) >= 16 for ln in lines)
    assert "shown once" in result.stderr and "Routing:" in result.stderr


@pytest.mark.parametrize(("people", "extra", "said"), [
    ("ana,boss\n", (), "unknown role 'boss'"),
    ("ana\nana\n", (), "listed twice"),
    ("# nobody\n", (), "names nobody"),
    ("ana\nlea,lead\n", ("--overlap", "2"), "needs at least 2 annotators"),
])
def test_a_bad_list_is_one_line_and_changes_nothing(ws: Path, people: str,
                                                    extra: tuple[str, ...], said: str) -> None:
    result = CliRunner().invoke(main, ["team", "-", "--workspace", str(ws), *extra],
                                input=people)
    assert result.exit_code == 1 and said in result.stderr
    assert not (ws / "annotations.sqlite").exists()


def test_local_mode_adds_people_without_passwords(ws: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILLAB_AUTH", "none")
    report = _team(ws, "ana\nben\n")
    assert all(p["password"] is None and p["status"] == "added"
               for p in report["people"])  # type: ignore[attr-defined]
