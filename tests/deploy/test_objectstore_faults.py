"""The object-store workspace under faults (a real S3-compatible server, see conftest.py): a
manifest read while it is being replaced is read again, never taken half; one that stays
damaged is one clear error naming the object; a compaction that fails after an import was
published leaves the import standing, reported as a success with a warning."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import trajectories.workspace as workspace_module
from tests.deploy.support import S3Server, s3_workspace
from tests.support import write_native_run
from trajectories.objectstore import S3Location
from trajectories.parts import MANIFEST
from trajectories.workspace import Workspace, WorkspaceError


def _put(server: S3Server, url: str, name: str, data: bytes) -> None:
    location = S3Location.parse(url)
    with server.filesystem().open_output_stream(f"{location.base}/{name}") as stream:
        stream.write(data)


def _get(server: S3Server, url: str, name: str) -> bytes:
    location = S3Location.parse(url)
    with server.filesystem().open_input_stream(f"{location.base}/{name}") as stream:
        return bytes(stream.read())


def _imported(tmp_path: Path, server: S3Server) -> tuple[str, Workspace, int]:
    url = server.new_bucket()
    ws = s3_workspace(tmp_path / "ws", url)
    report = ws.import_files([write_native_run(tmp_path / "run.jsonl", 12)], workers=1)
    assert report.imported == 12
    return url, ws, report.imported


def test_a_manifest_read_mid_replace_is_read_again(tmp_path: Path, s3_env: S3Server) -> None:
    url, _, rows = _imported(tmp_path, s3_env)
    whole = _get(s3_env, url, MANIFEST)
    # What a reader got when the object changed between its size and its bytes: the new
    # manifest's bytes cut to another length (valid JSON or not).
    _put(s3_env, url, MANIFEST, whole[: len(whole) // 2])
    restore = threading.Timer(0.2, _put, (s3_env, url, MANIFEST, whole))
    restore.start()
    started = time.monotonic()
    try:
        reader = s3_workspace(tmp_path / "replica", url)
        assert reader.summary()["trajectories"] == rows
    finally:
        restore.join()
    assert time.monotonic() - started < 10


def test_a_manifest_that_fails_its_checksum_is_one_clear_error(
        tmp_path: Path, s3_env: S3Server) -> None:
    url, _, _ = _imported(tmp_path, s3_env)
    whole = _get(s3_env, url, MANIFEST).decode()
    # Valid JSON, parts listed, but not what was written: a mix of two manifests.
    mixed = whole.replace('"parts": [', '"parts": [\n"part-from-elsewhere.parquet",', 1)
    assert mixed != whole
    _put(s3_env, url, MANIFEST, mixed.encode())
    reader = s3_workspace(tmp_path / "replica", url)
    with pytest.raises(WorkspaceError) as caught:
        reader.summary()
    message = str(caught.value)
    assert message.startswith(f"{url}/{MANIFEST}: content does not match its checksum")
    assert "\n" not in message


def test_a_compaction_failing_after_publish_leaves_the_import_a_success(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    url, ws, rows = _imported(tmp_path, s3_env)

    def store_down(self: Workspace) -> None:
        raise WorkspaceError(f"{url}: cannot list: connection refused")

    monkeypatch.setattr(workspace_module.Workspace, "maybe_compact", store_down)
    report = ws.import_files([write_native_run(tmp_path / "more.jsonl", 5, run="run-b")],
                             workers=1)
    assert report.imported == 5
    assert len(report.warnings) == 1 and "compaction after the import failed" in \
        report.warnings[0]
    assert s3_workspace(tmp_path / "replica", url).summary()[
        "trajectories"] == rows + 5


def test_a_mistyped_prefix_is_not_an_empty_workspace(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from faillab.cli import main
    from tests.support import make_trajectory

    url = s3_env.new_bucket()
    run = tmp_path / "failures.jsonl"
    run.write_text("".join(make_trajectory(final_answer=n).model_dump_json() + "\n"
                           for n in range(3)))
    ws = str(tmp_path / "ws")
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", url)
    for args in (["import", str(run)], ["prelabel", "--labeler", "heuristic"]):
        result = CliRunner().invoke(main, [*args, "--workspace", ws])
        assert result.exit_code == 0, result.stderr
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", url + "-typo")
    result = CliRunner().invoke(main, ["summary", "--workspace", ws])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: no trajectories at {url}-typo, but the annotation "
                               "store holds labels on 3 trajectories")
    # The right address still serves them.
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", url)
    result = CliRunner().invoke(main, ["summary", "--workspace", ws, "--json"])
    assert result.exit_code == 0 and '"trajectories": 3' in result.stdout

