"""`faillab import` carries labels to the new ids a re-import gives; `faillab workspace remove`
retires rows all at once and says which labels now point nowhere (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from labeling.store import OPERATOR, Store, open_store
from tests.support import (
    ids_by_position,
    import_with_older_importer,
    postgres_database,
    save_test_taxonomy,
    stored_ids,
    write_native_run,
)
from trajectories.workspace import Workspace


def invoke(*args: str, env: dict[str, str] | None = None,
           stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def _labelled_old_workspace(tmp_path: Path, url: str,
                            monkeypatch: pytest.MonkeyPatch) -> tuple[Workspace, Path, list[str]]:
    ws = Workspace(tmp_path / "ws")
    src = write_native_run(tmp_path / "a.jsonl", 4)
    import_with_older_importer(ws, [src], monkeypatch, changed={1})
    old = ids_by_position(ws, src)
    store = open_store(url)
    try:
        save_test_taxonomy(store)
        store.users.add("ana", "annotator")
        store.labels.add(old[1], "bad_join", annotator="ana", taxonomy_version="v")
        store.labels.add(old[2], "other", annotator="ana", taxonomy_version="v")
    finally:
        store.close()
    return ws, src, old


def _labels_by_id(url: str) -> dict[str, list[str]]:
    store: Store = open_store(url)
    try:
        out: dict[str, list[str]] = {}
        for label in store.labels.all(OPERATOR):
            out.setdefault(label.trajectory_id, []).append(label.category)
        return out
    finally:
        store.close()


def _reimport_carries_labels(tmp_path: Path, url: str, env: dict[str, str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    ws, src, old = _labelled_old_workspace(tmp_path, url, monkeypatch)
    code, out, err = invoke("import", str(src), "--workspace", str(ws.root), "--json", env=env)
    assert code == 0, err
    result = json.loads(out)
    new = ids_by_position(ws, src)
    assert (result["imported"], result["replaced"], result["duplicates"]) == (1, 1, 3)
    assert result["labels_carried"] == {old[1]: {"to": new[1], "labels": 1}}
    assert result["labels_not_carried"] == {}
    assert _labels_by_id(url) == {new[1]: ["bad_join"], old[2]: ["other"]}
    store = open_store(url)
    try:
        (entry,) = store.history.entries("trajectory", old[1])
        assert entry.action == "rekey" and entry.after is not None
        assert entry.after["trajectory_id"] == new[1]
    finally:
        store.close()


def test_reimport_carries_labels_sqlite(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{(tmp_path / 'ws' / 'annotations.sqlite').resolve()}"
    (tmp_path / "ws").mkdir()
    _reimport_carries_labels(tmp_path, url, {"FAILLAB_DATABASE_URL": ""}, monkeypatch)


@pytest.mark.postgres
def test_reimport_carries_labels_postgres(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with postgres_database("faillab_rekey") as url:
        _reimport_carries_labels(tmp_path, url, {"FAILLAB_DATABASE_URL": url}, monkeypatch)


def test_plain_text_import_says_what_was_replaced(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{(tmp_path / 'ws' / 'annotations.sqlite').resolve()}"
    (tmp_path / "ws").mkdir()
    ws, src, old = _labelled_old_workspace(tmp_path, url, monkeypatch)
    code, out, err = invoke("import", str(src), "--workspace", str(ws.root),
                            env={"FAILLAB_DATABASE_URL": ""})
    assert code == 0
    assert "imported 1, replaced 1, duplicates 3, rejected 0" in out
    assert f"carried 1 labels from {old[1]}" in err


def test_remove_asks_then_retires_and_reports_labels(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{(tmp_path / 'ws' / 'annotations.sqlite').resolve()}"
    (tmp_path / "ws").mkdir()
    ws, src, old = _labelled_old_workspace(tmp_path, url, monkeypatch)
    other = write_native_run(tmp_path / "b.jsonl", 2, run="r2")
    ws.import_files([other])
    env = {"FAILLAB_DATABASE_URL": ""}
    root = str(ws.root)
    # Not confirmed: nothing goes.
    code, _, err = invoke("workspace", "remove", "--run", "r1", "--workspace", root, env=env)
    assert code != 0 and "--yes" in err
    code, _, _ = invoke("workspace", "remove", "--run", "r1", "--workspace", root,
                        env=env, stdin="n\n")
    assert len(stored_ids(ws)) == 6
    # By run, confirmed: the run's rows go at once; the labels on them are reported.
    code, out, err = invoke("workspace", "remove", "--run", "r1", "--workspace", root,
                            "--yes", "--json", env=env)
    assert code == 0, err
    result = json.loads(out)
    assert result["removed"] == 4 and sorted(result["ids"]) == sorted(old)
    assert result["labels_not_carried"] == {old[1]: {"labels": 1}, old[2]: {"labels": 1}}
    assert stored_ids(ws) == sorted(ids_by_position(ws, other))
    assert ws.summary()["runs"] == 1
    # Removing forgot the import: the file can be imported again.
    code, out, _ = invoke("import", str(src), "--workspace", root, "--json", env=env)
    assert json.loads(out)["imported"] == 4


def test_remove_by_source_and_id(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    a = write_native_run(tmp_path / "a.jsonl", 3)
    b = write_native_run(tmp_path / "b.jsonl", 2, run="r2")
    ws.import_files([a, b])
    b_ids = ids_by_position(ws, b)
    root = str(ws.root)
    env = {"FAILLAB_DATABASE_URL": ""}
    code, out, _ = invoke("workspace", "remove", "--source", str(a), "--yes",
                          "--workspace", root, env=env)
    assert code == 0 and "removed 3 trajectories (runs: r1 (3))" in out
    assert stored_ids(ws) == sorted(b_ids)
    code, out, _ = invoke("workspace", "remove", "--id", b_ids[0], "--yes", "--json",
                          "--workspace", root, env=env)
    assert json.loads(out)["ids"] == [b_ids[0]] and stored_ids(ws) == [b_ids[1]]
    code, out, _ = invoke("workspace", "remove", "--id", "no-such-id", "--yes",
                          "--workspace", root, env=env)
    assert code == 0 and "nothing matches" in out and stored_ids(ws) == [b_ids[1]]
    assert not (ws.root / "annotations.sqlite").exists()  # no store made just to report


@pytest.mark.postgres
def test_labels_wait_in_the_journal_while_the_store_is_down(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with postgres_database("faillab_rekey_outage") as url:
        ws, src, old = _labelled_old_workspace(tmp_path, url, monkeypatch)
        # The store is unreachable while the import runs (nothing listens on port 1).
        down = {"FAILLAB_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/faillab"}
        code, _, err = invoke("import", str(src), "--workspace", str(ws.root), env=down)
        new = ids_by_position(ws, src)
        assert code != 0
        assert "imported 1, replaced 1" in err and "Nothing is lost" in err
        # The rows were replaced; the labels still sit on the old id, the pair is kept.
        assert old[1] not in stored_ids(ws) and new[1] in stored_ids(ws)
        assert _labels_by_id(url)[old[1]] == ["bad_join"]
        assert ws.pending_rekeys().rekeyed == {old[1]: new[1]}
        # Once the store is back, one command carries them and empties the journal.
        up = {"FAILLAB_DATABASE_URL": url}
        code, out, err = invoke("workspace", "carry-labels", "--workspace", str(ws.root),
                                "--json", env=up)
        assert code == 0, err
        assert json.loads(out)["labels_carried"] == {old[1]: {"to": new[1], "labels": 1}}
        assert _labels_by_id(url) == {new[1]: ["bad_join"], old[2]: ["other"]}
        assert not ws.pending_rekeys()
        code, out, _ = invoke("workspace", "carry-labels", "--workspace", str(ws.root), env=up)
        assert code == 0 and "nothing to carry" in out


def test_a_damaged_journal_stops_the_import_before_anything_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trajectories.rekey_journal import JOURNAL

    url = f"sqlite:///{(tmp_path / 'ws' / 'annotations.sqlite').resolve()}"
    (tmp_path / "ws").mkdir()
    ws, src, old = _labelled_old_workspace(tmp_path, url, monkeypatch)
    (ws.root / JOURNAL).write_text("{not json", "utf-8")
    code, _, err = invoke("import", str(src), "--workspace", str(ws.root),
                          env={"FAILLAB_DATABASE_URL": ""})
    assert code != 0 and JOURNAL in err and "not valid JSON" in err
    assert stored_ids(ws) == sorted(old)
