"""What the machine refuses the annotation store is one line, and nothing is half-saved: a full
disk (a small tmpfs this test mounts and removes), a read-only file system (the same tmpfs
remounted read-only), a SQLite file another program keeps locked, and a PostgreSQL server out
of connections (a role with no connection left, on the test server). The same store works
again once the cause is gone."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from click.testing import CliRunner
from sqlalchemy import make_url

from faillab.cli import main
from labeling.store import Store, StoreStorageError, open_store
from labeling.store import engine as engine_module
from labeling.store.base import storage_error

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


class SmallDisk:
    """A tmpfs of ``size`` at a fresh folder, filled and freed on demand."""

    def __init__(self, size: str = "4m") -> None:
        self.path = Path(tempfile.mkdtemp(prefix="faillab-disk-"))
        self.size = size
        self.filler = self.path / "filler"

    def mount(self) -> None:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs",
                               str(self.path)], capture_output=True, text=True)
        if done.returncode != 0:
            self.path.rmdir()
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")

    def remount(self, mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(self.path)], check=True,
                       capture_output=True)

    def fill(self) -> None:
        """Write until the disk refuses, down to the last byte."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for chunk in (1 << 16, 4096, 512, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)
        (self.path / "probe").unlink(missing_ok=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        with contextlib.suppress(OSError):
            self.path.rmdir()


@pytest.fixture
def disk() -> Iterator[SmallDisk]:
    d = SmallDisk()
    d.mount()
    try:
        yield d
    finally:
        d.unmount()


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text and "Traceback" not in text and "sqlalche.me" not in text, text
    return text


def user_names(store: Store) -> list[str]:
    return sorted(u.name for u in store.users.all())


def cli(workspace: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "--workspace", str(workspace)],
                                env={"FAILLAB_DATABASE_URL": ""})
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stderr


def test_a_full_disk_is_one_line_and_saves_nothing_half(disk: SmallDisk) -> None:
    url = f"sqlite:///{disk.path / 'annotations.sqlite'}"
    store = open_store(url)
    try:
        store.users.add("before", "annotator")
        disk.fill()
        with pytest.raises(StoreStorageError) as refused:
            # Each user is one small transaction; the disk refuses one of the first.
            for i in range(50):
                store.users.add(f"during-{i}", "annotator")
        message = one_line(refused.value)
        assert str(disk.path / "annotations.sqlite") in message
        assert "disk is full" in message or "disk I/O error" in message
        written = user_names(store)
        disk.free()
        # The same store works again, and what was refused left nothing behind.
        store.users.add("after", "annotator")
        names = user_names(store)
    finally:
        store.close()
    assert names == sorted([*written, "after"])
    assert not any(n == f"during-{len(written) - 1}" for n in names)


def test_the_cli_says_a_full_disk_in_one_line(disk: SmallDisk) -> None:
    ws = disk.path / "ws"
    assert cli(ws, "users", "add", "first", "--no-password")[0] == 0
    disk.fill()
    code, err = cli(ws, "users", "add", "second", "--no-password")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "disk is full" in lines[0] or "disk I/O error" in lines[0]
    disk.free()
    assert cli(ws, "users", "add", "second", "--no-password")[0] == 0
    store = open_store(f"sqlite:///{ws / 'annotations.sqlite'}")
    try:
        assert user_names(store) == ["first", "second"]
    finally:
        store.close()


def test_a_read_only_file_system_is_one_line(disk: SmallDisk) -> None:
    url = f"sqlite:///{disk.path / 'annotations.sqlite'}"
    store = open_store(url)
    store.users.add("before", "annotator")
    store.close()
    disk.remount("ro")
    try:
        with pytest.raises(StoreStorageError) as refused:
            ro = open_store(url)
            try:
                ro.users.add("during", "annotator")
            finally:
                ro.close()
        assert "read-only" in one_line(refused.value) or "cannot be opened" in str(
            refused.value)
        code, err = cli(disk.path / "ws-ro", "users", "list")
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert "read-only" in err
    finally:
        disk.remount("rw")
    store = open_store(url)
    try:
        assert user_names(store) == ["before"]
    finally:
        store.close()


def test_a_file_another_program_keeps_locked_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_S", 0.3)
    path = tmp_path / "annotations.sqlite"
    store = open_store(f"sqlite:///{path}")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        store.users.add("before", "annotator")
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreStorageError, match="keeps the file locked") as refused:
            store.users.add("during", "annotator")
        one_line(refused.value)
        other.execute("ROLLBACK")
        store.users.add("after", "annotator")
        assert user_names(store) == ["after", "before"]
    finally:
        other.close()
        store.close()


def test_a_postgresql_server_out_of_connections_is_one_line() -> None:
    role = f"faillab_full_{uuid.uuid4().hex[:8]}"
    admin = sqlalchemy.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            # A role allowed no connection: the server refuses it with SQLSTATE 53300, as it
            # refuses everyone once max_connections are taken.
            conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
        try:
            with pytest.raises(StoreStorageError, match="no connection left") as refused:
                open_store(f"postgresql+psycopg://{role}@127.0.0.1:5432/test").close()
            assert "127.0.0.1:5432/test" in one_line(refused.value)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP ROLE {role}")
    finally:
        admin.dispose()


def test_permission_denied_names_the_store() -> None:
    # Root (the test runner) is never refused a file, so the refusal is the OS error itself, as
    # the store's own lock and folder calls raise it for another user.
    url = make_url("sqlite:////srv/faillab/annotations.sqlite")
    refused = PermissionError(errno.EACCES, "Permission denied", "/srv/faillab")
    said = storage_error(url, refused)
    assert said is not None
    assert one_line(said) == ("the annotation store at /srv/faillab/annotations.sqlite cannot "
                              "be used: permission denied (Permission denied)")
    assert storage_error(url, FileNotFoundError(errno.ENOENT, "gone")) is None
