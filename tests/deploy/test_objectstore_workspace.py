"""A workspace whose parts live in an S3-compatible object store (a real HTTP server, see
conftest.py) holds and answers exactly what a local workspace of the same files does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import trajectories.compaction as compaction_module
import trajectories.parts as parts_module
from faillab.cli import main
from faillab_core.settings import Settings
from tests.deploy.support import S3Server, s3_workspace
from tests.support import (
    REAL_TRAJECTORIES,
    ids_by_position,
    import_with_older_importer,
    require_shared,
    stored_ids,
    write_native_run,
)
from trajectories.importers import ImportProblem
from trajectories.objectstore import S3Location
from trajectories.views import BrowseFilter, browse_page
from trajectories.workspace import Workspace, WorkspaceError


def _files(tmp_path: Path) -> list[Path]:
    """The real harness runs plus one file repeating another (every record a duplicate)."""
    src = tmp_path / "src"
    (src / "again").mkdir(parents=True)
    files = [Path(shutil.copy(p, src / p.name))
             for p in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))]
    files.append(Path(shutil.copy(files[0], src / "again" / files[0].name)))
    return files


def _rows(ws: Workspace) -> list[tuple[Any, ...]]:
    return ws.connect().execute("SELECT * FROM parts ORDER BY id").fetchall()


def _objects(server: S3Server, url: str) -> list[str]:
    location = S3Location.parse(url)
    fs = server.filesystem()
    import pyarrow.fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(location.base, allow_not_found=True))
    return sorted(i.base_name for i in infos)


def test_object_store_workspace_round_trips(tmp_path: Path, s3_env: S3Server) -> None:
    files = _files(tmp_path)
    url = s3_env.new_bucket()
    local = Workspace(tmp_path / "local", trajectories_url="")
    remote = s3_workspace(tmp_path / "remote", url)
    a = local.import_files(files, workers=2)
    b = remote.import_files(files, workers=2)
    assert a.as_json() == b.as_json() and b.imported > 0 and b.duplicates > 0
    # The parts are objects in the bucket, not files in the workspace folder.
    assert not list((tmp_path / "remote").rglob("*.parquet"))
    objects = _objects(s3_env, url)
    assert "manifest.json" in objects
    assert {p.name for p in remote.part_files()} <= set(objects)
    # Another process's view (a fresh object, as a second replica would build it) reads the
    # same rows, counts, lists, pages and payloads as the local workspace.
    reader = s3_workspace(tmp_path / "replica", url)
    assert _rows(reader) == _rows(local)
    for source in ("recorded", "exact_match"):
        assert reader.summary(source) == local.summary(source)
    assert reader.list(failed=True) == local.list(failed=True)
    flt = BrowseFilter(success=False)
    page_r, total_r = browse_page(reader, flt, sort="n_turns", limit=20)
    page_l, total_l = browse_page(local, flt, sort="n_turns", limit=20)
    assert total_r == total_l and page_r.equals(page_l)
    some = [r["id"] for r in local.list()][:: max(1, b.imported // 5)]
    for tid in some:
        got = reader.get(tid)
        assert got is not None and got == local.get(tid)
    assert reader.get("no-such-id") is None
    # Re-importing the same files adds nothing, on either side.
    again = remote.import_files(files, workers=1)
    assert again.imported == 0 and _rows(reader) == _rows(local)


def test_readers_see_new_imports_and_compaction_keeps_rows(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files(tmp_path)[:4]
    url = s3_env.new_bucket()
    writer = s3_workspace(tmp_path / "w", url)
    reader = s3_workspace(tmp_path / "r", url)
    monkeypatch.setattr(parts_module, "REMOTE_MANIFEST_REUSE_S", 0.2)
    writer.import_files(files[:1], workers=1)
    first = reader.summary()["trajectories"]
    for path in files[1:]:
        writer.import_files([path], workers=1)
    time.sleep(0.3)  # past the reader's reuse of the manifest it read
    before = _rows(reader)  # the long-lived reader picked up the new parts
    assert len(before) > first
    old_parts = writer.part_files()
    monkeypatch.setattr(compaction_module, "COMPACT_ROWS", 1_000_000)
    result = writer.compact()
    assert result["merged_parts"] == len(old_parts) and result["new_parts"] == 1
    assert _rows(reader) == before
    # Retired parts stay for readers still on them, and go once their grace has passed.
    assert {p.name for p in old_parts} <= set(_objects(s3_env, url))
    monkeypatch.setattr(parts_module, "RETIRED_GRACE_S", -1.0)
    writer.import_files(files[:1], workers=1)  # any write cleans up
    assert not {p.name for p in old_parts} & set(_objects(s3_env, url))
    assert _rows(reader) == before


def test_readers_reuse_the_manifest_briefly_and_writers_see_their_own_at_once(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page run asks the signature of every loader; each ask was a GET of the manifest. A
    reader reuses what it read for REMOTE_MANIFEST_REUSE_S; its own process's writes show at
    once, another process's once that time has passed."""
    files = _files(tmp_path)[:2]
    url = s3_env.new_bucket()
    writer = s3_workspace(tmp_path / "w", url)
    reader = s3_workspace(tmp_path / "r", url)
    now = [100.0]  # the reader's clock: the import's own time does not age its manifest
    reader.parts.clock = lambda: now[0]
    writer.import_files(files[:1], workers=1)
    gets: list[str] = []
    assert reader.parts.remote is not None
    read_text = reader.parts.remote.read_text

    def counted(name: str) -> str | None:
        gets.append(name)
        return read_text(name)

    monkeypatch.setattr(reader.parts.remote, "read_text", counted)
    first = reader.signature()
    assert [reader.signature() for _ in range(5)] == [first] * 5
    assert len(gets) == 1  # six asks, one read
    writer.import_files(files[1:], workers=1)
    assert writer.signature() != first  # the writer's own import: at once
    assert reader.signature() == first  # another process's: not yet
    now[0] += parts_module.REMOTE_MANIFEST_REUSE_S + 0.1
    assert reader.signature() != first and len(gets) == 2
    assert reader.summary()["trajectories"] == writer.summary()["trajectories"]


def test_readers_read_the_next_manifest_ahead_while_they_reuse_the_last(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past half the reuse time, an ask is answered from the kept manifest while one
    background GET reads the next: with a team, one page run in three waited for that GET.
    Another process's import still shows within the reuse time of its publication."""
    files = _files(tmp_path)[:2]
    url = s3_env.new_bucket()
    writer = s3_workspace(tmp_path / "w", url)
    reader = s3_workspace(tmp_path / "r", url)
    writer.import_files(files[:1], workers=1)
    remote = reader.parts.remote
    assert remote is not None
    now = [100.0]
    reader.parts.clock = lambda: now[0]
    gets: list[bool] = []  # per GET: whether the asking thread itself waited for it
    read_text = remote.read_text

    def counted(name: str) -> str | None:
        gets.append(threading.current_thread() is threading.main_thread())
        return read_text(name)

    monkeypatch.setattr(remote, "read_text", counted)
    first = reader.signature()
    writer.import_files(files[1:], workers=1)
    now[0] += 0.4 * parts_module.REMOTE_MANIFEST_REUSE_S
    assert reader.signature() == first and gets == [True]  # young: reused, nothing read
    now[0] += 0.2 * parts_module.REMOTE_MANIFEST_REUSE_S  # past half the reuse time
    assert [reader.signature() for _ in range(4)] == [first] * 4  # nobody waits...
    deadline = time.monotonic() + 30
    while reader.signature() == first and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gets == [True, False]  # ...while one read ran beside them
    assert reader.summary()["trajectories"] == writer.summary()["trajectories"]
    assert len(gets) == 2  # the manifest read ahead is reused in turn


def test_a_bad_record_leaves_nothing_in_the_bucket(tmp_path: Path, s3_env: S3Server) -> None:
    files = _files(tmp_path)[:3]
    records = json.loads(files[2].read_text("utf-8"))
    records[1]["messages"] = "not a list"
    files[2].write_text(json.dumps(records), "utf-8")
    url = s3_env.new_bucket()
    ws = s3_workspace(tmp_path / "ws", url)
    with pytest.raises(ImportProblem) as err:
        ws.import_files(files, workers=2)
    assert err.value.path == str(files[2]) and err.value.field == "messages"
    assert ws.summary()["trajectories"] == 0
    assert not [o for o in _objects(s3_env, url) if o.endswith(".parquet")]


def test_cli_reads_and_writes_the_configured_object_store(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [str(f) for f in _files(tmp_path)[:2]]
    runner = CliRunner()

    def run(*args: str) -> Any:
        result = runner.invoke(main, [*args, "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    local = ("--workspace", str(tmp_path / "local"))
    remote = ("--workspace", str(tmp_path / "remote"))
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", "")
    imported_local = run("import", *files, *local)
    listed_local, summary_local = run("list", *local), run("summary", *local)
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", s3_env.new_bucket())
    assert run("import", *files, *remote) == imported_local
    assert run("list", *remote) == listed_local
    assert run("summary", *remote) == summary_local


def test_a_trajectories_url_that_is_not_s3_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="s3://bucket/prefix"):
        Workspace(tmp_path, trajectories_url="gs://bucket/x")


def test_a_missing_bucket_is_a_one_line_error(tmp_path: Path, s3_server: S3Server) -> None:
    """A typo in the bucket name must not look like an empty workspace."""
    faillab = str(Path(sys.executable).parent / "faillab")
    env = {**os.environ, **s3_server.env(),
           "FAILLAB_TRAJECTORIES_URL": "s3://no-such-bucket-here/trajectories"}
    result = subprocess.run([faillab, "summary", "--workspace", str(tmp_path / "ws")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: s3://no-such-bucket-here/trajectories: bucket 'no-such-bucket-here' does not "
        "exist at this endpoint (faillab never creates buckets; check FAILLAB_TRAJECTORIES_URL "
        "and AWS_ENDPOINT_URL)"]


def test_object_store_settings_come_from_the_standard_aws_variables() -> None:

    env = {"FAILLAB_TRAJECTORIES_URL": "s3://team/ws", "AWS_ENDPOINT_URL": "http://minio:9000",
           "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
           "AWS_SECRET_ACCESS_KEY": "very-secret-value", "AWS_SESSION_TOKEN": "token-value"}
    s = Settings.from_env(env)
    assert (s.trajectories_url, s.s3_endpoint, s.s3_region) == (
        "s3://team/ws", "http://minio:9000", "eu-west-1")
    assert (s.s3_access_key_id, s.s3_secret_access_key, s.s3_session_token) == (
        "AKIDEXAMPLE", "very-secret-value", "token-value")
    # Settings objects land in logs and tracebacks: no credential in their text.
    assert not any(v in repr(s) for v in ("AKIDEXAMPLE", "very-secret-value", "token-value"))


def test_reimport_and_remove_replace_rows_in_the_bucket(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A newer importer's re-import retires the file's old rows in one manifest write (the
    old objects stay for readers still on them); a removal does the same."""
    url = s3_env.new_bucket()
    ws = s3_workspace(tmp_path / "ws", url)
    src = write_native_run(tmp_path / "a.jsonl", 4)
    other = write_native_run(tmp_path / "b.jsonl", 2, run="r2")
    import_with_older_importer(ws, [src, other], monkeypatch, changed={3})
    old = ids_by_position(ws, src)
    before = set(_objects(s3_env, url))

    report = ws.import_files([src, other], workers=2)

    new = ids_by_position(ws, src)
    assert report.replaced == 1 and report.rekeyed == {old[3]: new[3]}
    assert stored_ids(ws) == sorted(new + ids_by_position(ws, other))
    manifest = ws.parts.read_manifest()
    assert manifest is not None
    retired = set(manifest["retired"])
    assert retired and retired <= before <= set(_objects(s3_env, url))

    removed = ws.remove(runs=["r2"])
    assert len(removed.ids) == 2 and stored_ids(ws) == sorted(new)
    assert ws.summary()["trajectories"] == 4
