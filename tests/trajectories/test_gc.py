"""``faillab workspace gc`` on a folder workspace: leftovers of killed imports (hidden staging
files, parts nobody published) go once past the grace period; young ones and everything the
manifest lists stay."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from faillab.cli import main
from tests.support import write_native_run
from trajectories.workspace import Workspace

HOUR = 3600.0


def _plant(ws: Workspace, name: str, age_s: float) -> Path:
    source = ws.part_files()[0]
    path = ws.parts_dir / name
    shutil.copyfile(source, path)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def _gc(ws: Workspace, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["workspace", "gc", "--json", "--workspace",
                                       str(ws.root), *args],
                                env={"FAILLAB_DATABASE_URL": "", "FAILLAB_TRAJECTORIES_URL": ""})
    assert result.exit_code == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_gc_removes_exactly_the_old_leftovers(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", trajectories_url="")
    ws.import_files([write_native_run(tmp_path / "run.jsonl", 10)], workers=1)
    visible = {p.name for p in ws.part_files()}
    old = {_plant(ws, ".part-20200101T000000-aaaa.parquet.tmp", HOUR).name,
           _plant(ws, "part-20200101T000000-bbbb.parquet", HOUR).name}
    young = {_plant(ws, ".part-20200101T000000-cccc.parquet.tmp", 10).name,
             _plant(ws, "part-20200101T000000-dddd.parquet", 10).name}
    # A part the manifest lists is never a leftover, however old.
    listed = ws.parts_dir / sorted(visible)[0]
    os.utime(listed, (time.time() - 10 * HOUR,) * 2)

    planned = _gc(ws, "--dry-run")
    assert {i["name"] for i in planned["would_remove"]} == old
    assert set(planned["kept_young"]) == young
    assert {p.name for p in ws.parts_dir.iterdir()} >= old | young | visible

    done = _gc(ws)
    assert {i["name"] for i in done["removed"]} == old
    names = {p.name for p in ws.parts_dir.iterdir()}
    assert not names & old and young | visible <= names
    assert Workspace(ws.root, trajectories_url="").summary()["trajectories"] == 10
    assert _gc(ws)["removed"] == []


def test_gc_text_output_names_the_folder(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", trajectories_url="")
    ws.import_files([write_native_run(tmp_path / "run.jsonl", 3)], workers=1)
    _plant(ws, ".part-20200101T000000-aaaa.parquet.tmp", HOUR)
    result = CliRunner().invoke(main, ["workspace", "gc", "--workspace", str(ws.root)],
                                env={"FAILLAB_DATABASE_URL": "", "FAILLAB_TRAJECTORIES_URL": ""})
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"{ws.parts_dir}: removed 1 leftovers")
