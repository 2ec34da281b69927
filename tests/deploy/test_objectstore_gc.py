"""The object-store workspace (a real S3-compatible server, see conftest.py): what a killed
import left under the prefix is listed and removed by ``faillab workspace gc`` once past the
grace period; messages name the bucket and prefix; the store stopped mid-import is one line
and a retry completes."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from tests.deploy.support import S3Server, free_port, s3_workspace
from tests.support import write_native_run
from trajectories.objectstore import S3Location
from trajectories.parts import Parts
from trajectories.staged_import import StagedImport
from trajectories.workspace import Workspace


def _plant(server: S3Server, ws: Workspace, name: str) -> None:
    """A part object no manifest lists: what an import killed before publishing leaves."""
    fs = server.filesystem()
    with fs.open_input_stream(str(ws.part_files()[0])) as stream:
        data = bytes(stream.read())
    with fs.open_output_stream(f"{S3Location.parse(ws.trajectories_location).base}/{name}") \
            as stream:
        stream.write(data)


def _names(ws: Workspace) -> set[str]:
    assert ws.remote is not None
    return {name for name, _ in ws.remote.objects()}


def test_gc_removes_exactly_the_old_orphans(tmp_path: Path, s3_env: S3Server) -> None:
    url = s3_env.new_bucket()
    ws = s3_workspace(tmp_path / "ws", url)
    ws.import_files([write_native_run(tmp_path / "run.jsonl", 10)], workers=1)
    visible = {p.name for p in ws.part_files()}
    old = {"part-20200101T000000-aaaaaaaaaaaa.parquet", "part-20200101T000000-bbbb.parquet"}
    for name in old:
        _plant(s3_env, ws, name)
    # S3 keeps modification times to the second: 3 s apart is "older than 1.5 s" for sure.
    time.sleep(3)
    young_from = time.time()
    young = {"part-20200101T000000-cccccccccccc.parquet"}
    for name in young:
        _plant(s3_env, ws, name)

    planned = ws.collect_garbage(dry_run=True, grace_s=1.5, now=young_from)
    assert {i.name for i in planned.removed} == old and {i.name for i in planned.young} == young
    assert _names(ws) == visible | old | young

    done = ws.collect_garbage(grace_s=1.5, now=young_from)
    assert {i.name for i in done.removed} == old and done.location == url
    assert _names(ws) == visible | young
    assert s3_workspace(tmp_path / "replica", url).summary()["trajectories"] == 10


def test_gc_cli_keeps_young_orphans_and_names_the_bucket(
        tmp_path: Path, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    url = s3_env.new_bucket()
    ws = s3_workspace(tmp_path / "ws", url)
    ws.import_files([write_native_run(tmp_path / "run.jsonl", 4)], workers=1)
    _plant(s3_env, ws, "part-20200101T000000-aaaaaaaaaaaa.parquet")
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", url)
    monkeypatch.setenv("FAILLAB_DATABASE_URL", "")
    result = CliRunner().invoke(main, ["workspace", "gc", "--workspace", str(ws.root)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"{url}: removed 0 leftovers (0 bytes)"
    assert "kept 1 leftovers younger than 5 min" in result.stderr
    assert "part-20200101T000000-aaaaaaaaaaaa.parquet" in _names(ws)

    # A prefix with nothing published is named as the place looked at, not the local folder.
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", url + "-elsewhere")
    result = CliRunner().invoke(main, ["workspace", "compact", "--workspace", str(ws.root)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"error: {url}-elsewhere: no workspace here "
                                     "(run `faillab import` first)")
    result = CliRunner().invoke(main, ["prelabel", "--workspace", str(ws.root)])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(f"error: no workspace at {url}-elsewhere: ")


@pytest.fixture
def stoppable(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[S3Server, object]]:
    """A server of this test's own, which the test stops and starts again (same port, same
    data: moto keeps its buckets in this process)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    s3 = S3Server(f"http://127.0.0.1:{port}")
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    try:
        yield s3, server
    finally:
        server.stop()


@pytest.mark.parametrize("when", ["stage", "publish"], ids=["before the parts", "at the publish"])
def test_store_stopped_mid_import_is_one_line_and_a_retry_completes(
        tmp_path: Path, stoppable: tuple[S3Server, object],
        monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    s3, server = stoppable
    url = s3.new_bucket()
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", url)
    monkeypatch.setenv("FAILLAB_DATABASE_URL", "")
    run = write_native_run(tmp_path / "run.jsonl", 300)
    args = ["import", str(run), "--workspace", str(tmp_path / "ws")]
    # The store goes away after the import has read the workspace under its lock: before any
    # part is written, or with the parts written and the manifest not yet naming them.
    target = StagedImport if when == "stage" else Parts
    step = "stage" if when == "stage" else "publish"
    real = getattr(target, step)

    def store_stops_first(self: object, *a: object, **kw: object) -> object:
        server.stop()  # type: ignore[attr-defined]
        return real(self, *a, **kw)

    monkeypatch.setattr(target, step, store_stops_first)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("warning: ")  # no PostgreSQL lock: warned
    assert lines[1].startswith(f"error: {url}: ") and "not answering" in lines[1]
    assert "run the same command again" in lines[1]

    monkeypatch.setattr(target, step, real)
    server.start()  # type: ignore[attr-defined]
    # Nothing of the failed import shows; the same command imports every record once.
    assert s3_workspace(tmp_path / "reader", url).summary()["trajectories"] == 0
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["imported"] == 300
    assert s3_workspace(tmp_path / "replica", url).summary()["trajectories"] == 300
