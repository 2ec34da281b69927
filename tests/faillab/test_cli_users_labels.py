"""`faillab users` and `faillab labels`: people and roles, label export/import round trips,
and imports that fail as a whole with a one-line error naming the row."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from faillab_core.settings import Settings
from labeling.store import Store, open_store
from taxonomy import default_taxonomy
from trajectories.workspace import Workspace


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    env = {"FAILLAB_DATABASE_URL": ""}
    result = CliRunner().invoke(main, list(args), input=stdin, env=env)
    return result.exit_code, result.stdout, result.stderr


def store_of(ws: Path) -> Store:
    return open_store(Settings.from_env({}, workspace=ws).annotations_url())


@pytest.fixture
def ws(demo_workspace: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    return root


def test_users_add_list_role(tmp_path: Path) -> None:
    ws = str(tmp_path / "fresh")
    code, out, err = invoke("users", "add", "ana", "--role", "lead", "--workspace", ws,
                            stdin="s3cret pass\n")
    assert code == 0, err
    assert "added ana (lead)" in out
    store = store_of(Path(ws))
    try:
        assert store.users.verify_password("ana", "s3cret pass") is not None
        assert store.users.verify_password("ana", "wrong") is None
    finally:
        store.close()
    code, _, err = invoke("users", "add", "bob", "--no-password", "--workspace", ws)
    assert code == 0, err
    code, out, _ = invoke("users", "list", "--json", "--workspace", ws)
    listed = json.loads(out)
    assert [(u["name"], u["role"], u["has_password"]) for u in listed] == [
        ("ana", "lead", True), ("bob", "annotator", False)]
    code, out, _ = invoke("users", "role", "bob", "admin", "--workspace", ws)
    assert code == 0 and "bob is now admin" in out
    code, out, _ = invoke("users", "list", "--workspace", ws)
    assert "bob\tadmin\t(no password)" in out


def test_users_errors_are_one_line(tmp_path: Path) -> None:
    ws = str(tmp_path / "fresh")
    assert invoke("users", "add", "ana", "--no-password", "--workspace", ws)[0] == 0
    code, _, err = invoke("users", "add", "ana", "--no-password", "--workspace", ws)
    assert code == 1 and err.strip() == "error: user 'ana' already exists"
    code, _, err = invoke("users", "add", "eve", "--workspace", ws, stdin="\n")
    assert code == 1 and "password is empty" in err and len(err.strip().splitlines()) == 1
    code, _, err = invoke("users", "role", "nobody", "lead", "--workspace", ws)
    assert code == 1 and "unknown user" in err


def _failed_ids(root: Path, n: int) -> list[str]:
    return [r["id"] for r in Workspace(root).list(failed=True, limit=n)]


def test_labels_export_import_round_trip(ws: Path, tmp_path: Path) -> None:
    tax = default_taxonomy()
    a, b = _failed_ids(ws, 2)
    store = store_of(ws)
    store.users.add("ana")
    store.labels.add(a, "sql_logic_error", annotator="ana", taxonomy_version=tax.version,
                     note='comma, "quotes"\nand a newline', first_error_step=3)
    store.labels.add(b, "stuck_in_loop", annotator=None, source="llm", confidence=0.9,
                     taxonomy_version=tax.version)
    store.close()
    for fmt in ("csv", "jsonl"):
        code, out, err = invoke("labels", "export", "--format", fmt, "--workspace", str(ws))
        assert code == 0, err
        out_file = tmp_path / f"labels.{fmt}"
        code, _, _ = invoke("labels", "export", "--format", fmt, "--output", str(out_file),
                            "--workspace", str(ws))
        assert code == 0 and out_file.read_text() == out
        target = tmp_path / f"other-{fmt}"
        shutil.copytree(ws, target)
        (target / "annotations.sqlite").unlink()
        code, out, err = invoke("labels", "import", str(out_file), "--workspace", str(target))
        assert code == 0, err
        assert "imported 2 label(s)" in out
        copy = store_of(target)
        try:
            labels = {lab.trajectory_id: lab for lab in copy.labels.all()}
            assert labels[a].annotator == "ana" and labels[a].category == "sql_logic_error"
            assert labels[a].note == 'comma, "quotes"\nand a newline'
            assert labels[a].first_error_step == 3
            assert labels[a].taxonomy_version == tax.version
            assert labels[b].source == "llm" and labels[b].confidence == 0.9
            assert copy.users.get("ana") is not None
        finally:
            copy.close()


def _csv(rows: list[dict[str, str]], columns: list[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def test_import_accepts_category_names_and_creates_annotators(ws: Path, tmp_path: Path) -> None:
    a, b = _failed_ids(ws, 2)
    path = tmp_path / "in.csv"
    path.write_text(_csv([
        {"trajectory_id": a, "annotator": "newbie", "source": "human",
         "category": "SQL Logic Error"},
        {"trajectory_id": b, "annotator": "newbie", "source": "human",
         "category": "stuck_in_loop"},
    ], ["trajectory_id", "annotator", "source", "category"]))
    code, _, err = invoke("labels", "import", str(path), "--workspace", str(ws))
    assert code == 0, err
    store = store_of(ws)
    try:
        user = store.users.get("newbie")
        assert user is not None and user.role == "annotator"
        assert sorted(lab.category for lab in store.labels.all()) == [
            "sql_logic_error", "stuck_in_loop"]
        assert {lab.taxonomy_version for lab in store.labels.all()} == {
            default_taxonomy().version}
    finally:
        store.close()


@pytest.mark.parametrize(("rows", "columns", "message"), [
    ([{"trajectory_id": "GOOD", "annotator": "x", "source": "human", "category": "stuck_in_loop"},
      {"trajectory_id": "no-such-id", "annotator": "x", "source": "human",
       "category": "stuck_in_loop"}],
     ["trajectory_id", "annotator", "source", "category"],
     "row 2: unknown trajectory id 'no-such-id'"),
    ([{"trajectory_id": "GOOD", "annotator": "x", "source": "human", "category": "Typo Error"}],
     ["trajectory_id", "annotator", "source", "category"],
     "row 1: unknown category 'Typo Error'"),
    ([{"trajectory_id": "GOOD", "annotator": "x", "source": "human"}],
     ["trajectory_id", "annotator", "source"],
     "missing column(s): category"),
])
def test_import_errors_store_nothing(ws: Path, tmp_path: Path, rows: list[dict[str, str]],
                                     columns: list[str], message: str) -> None:
    [good] = _failed_ids(ws, 1)
    for row in rows:
        row["trajectory_id"] = row["trajectory_id"].replace("GOOD", good)
    path = tmp_path / "bad.csv"
    path.write_text(_csv(rows, columns))
    code, _, err = invoke("labels", "import", str(path), "--workspace", str(ws))
    assert code == 1
    assert message in err and "nothing was imported" in err
    assert len(err.strip().splitlines()) == 1
    store = store_of(ws)
    try:
        assert store.labels.all() == []
        assert store.users.get("x") is None
    finally:
        store.close()


def test_import_jsonl_error_names_the_row(ws: Path, tmp_path: Path) -> None:
    [good] = _failed_ids(ws, 1)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"trajectory_id": good, "annotator": "x", "source": "human",
                                "category": "stuck_in_loop"}) + "\n{not json\n")
    code, _, err = invoke("labels", "import", str(path), "--workspace", str(ws))
    assert code == 1 and "row 2" in err
