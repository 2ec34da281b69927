"""Imports from several machines into one object-store workspace: the PostgreSQL advisory lock
makes them take turns, so no import's parts are left out of the manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from faillab.cli.shared_lock import lock_key, uses_shared_lock
from faillab_core.settings import Settings
from tests.deploy.support import S3Server, s3_workspace
from tests.support import make_trajectory, postgres_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url() -> Iterator[str]:
    with postgres_database("faillab_lock") as url:
        yield url


def _write_jsonl(path: Path, task_prefix: str, n: int) -> Path:
    lines = []
    for i in range(n):
        rec = make_trajectory(final_answer=i).model_dump(mode="json", exclude={"id"})
        rec["task"]["id"] = f"{task_prefix}-{i}"
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def _env(server: S3Server, url: str, database: str) -> dict[str, str]:
    env = {**os.environ, **server.env(), "FAILLAB_TRAJECTORIES_URL": url,
           "FAILLAB_DATABASE_URL": database}
    env.pop("AWS_SESSION_TOKEN", None)
    return env


def _import(env: dict[str, str], workspace: Path, source: Path) -> subprocess.Popen[str]:
    # Each machine has its own workspace folder (its own file lock); only the parts are shared.
    return subprocess.Popen(
        [sys.executable, "-m", "faillab.cli", "import", str(source), "--workspace",
         str(workspace), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_lock_key_is_one_per_parts_location() -> None:
    a = lock_key("s3://bucket/team/trajectories")
    assert a == lock_key("s3://bucket/team/trajectories/")
    assert a != lock_key("s3://bucket/other/trajectories")
    assert -(2**63) <= a < 2**63


def test_only_remote_parts_with_postgres_take_the_shared_lock() -> None:
    def settings(url: str, db: str) -> Settings:
        return Settings.from_env({"FAILLAB_TRAJECTORIES_URL": url, "FAILLAB_DATABASE_URL": db})

    pg = "postgresql+psycopg://u@127.0.0.1:5432/x"
    assert uses_shared_lock(settings("s3://b/p", pg))
    assert not uses_shared_lock(settings("", pg))
    assert not uses_shared_lock(settings("s3://b/p", "sqlite:////tmp/a.sqlite"))
    assert not uses_shared_lock(settings("s3://b/p", ""))


def test_an_import_waits_while_another_machine_holds_the_lock(
        tmp_path: Path, s3_env: S3Server, pg_url: str) -> None:
    url = s3_env.new_bucket()
    source = _write_jsonl(tmp_path / "a.jsonl", "a", 5)
    holder = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with holder.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": lock_key(url)})
        proc = _import(_env(s3_env, url, pg_url), tmp_path / "machine-b", source)
        try:
            # Blocked on the lock: still running, nothing published, and it said why.
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=8)
            assert s3_workspace(tmp_path / "reader", url).part_files() == []
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_key(url)})
        out, err = proc.communicate(timeout=120)
    holder.dispose()
    assert proc.returncode == 0, err
    assert "waiting: another machine" in err
    assert json.loads(out)["imported"] == 5
    assert len(s3_workspace(tmp_path / "reader", url).list()) == 5


def test_concurrent_imports_from_two_machines_neither_lose_nor_duplicate(
        tmp_path: Path, s3_env: S3Server, pg_url: str) -> None:
    url = s3_env.new_bucket()
    env = _env(s3_env, url, pg_url)
    shared = _write_jsonl(tmp_path / "shared.jsonl", "s", 40)
    own = [_write_jsonl(tmp_path / f"{m}.jsonl", m, 40) for m in ("a", "b")]
    # Both machines import the same file at the same moment, then each its own file: without
    # the lock both would see an empty workspace and store the shared records twice, or the
    # later manifest would leave the other's parts out.
    imported = 0
    for sources in ((shared, shared), tuple(own)):
        procs = [_import(env, tmp_path / f"machine-{i}", source)
                 for i, source in enumerate(sources)]
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
            imported += json.loads(out)["imported"]
    assert imported == 120
    rows = s3_workspace(tmp_path / "reader", url).list()
    assert len(rows) == 120 and len({row["id"] for row in rows}) == 120
    assert {row["task_id"].split("-")[0] for row in rows} == {"s", "a", "b"}


def test_remote_parts_without_postgres_warn(tmp_path: Path, s3_env: S3Server) -> None:
    url = s3_env.new_bucket()
    source = _write_jsonl(tmp_path / "a.jsonl", "a", 3)
    env = _env(s3_env, url, f"sqlite:///{tmp_path / 'labels.sqlite'}")
    started = time.monotonic()
    out, err = _import(env, tmp_path / "machine-a", source).communicate(timeout=120)
    assert "imports from other machines are not excluded" in err, (err, time.monotonic() - started)
    assert json.loads(out)["imported"] == 3
