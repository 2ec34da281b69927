"""The one file lock every writer on a machine uses: the workspace's write lock, the SQLite
annotation store's writer queue and the Batch API state file.

Threads of one process first queue on a mutex, which hands the lock over the moment it is free
(no polling inside a process); processes then take ``flock`` on a lock file that stays open for
the life of the lock object. The OS releases the lock of a process that dies, so a ``kill -9``
never leaves a workspace or a store locked. A wait without a limit blocks in the kernel; a
wait with one polls, starting at half a millisecond and backing off to five, because the
store's writes take milliseconds and a waiter should not sleep long past the hand-over.

Why not the ``filelock`` package: on the store's contended write path (4 processes x 300
label writes on SQLite) it took about twice as long as this, since every attempt opens and
closes the lock file and it polls at a fixed interval. Machines are not excluded by any file
lock: writers sharing an object store are serialised by PostgreSQL (``faillab.cli.shared_lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from faillab_core.errors import FaillabError

#: The first and the longest pause of a waiter that polls (seconds).
FIRST_POLL_S = 0.0005
LONGEST_POLL_S = 0.005


class LockBusyError(FaillabError):
    """The lock stayed taken for the whole wait; the message says who to wait for."""


class MachineLock:
    """Exclusive across the threads and the processes of one machine, on ``path``."""

    def __init__(self, path: str | Path, *, busy_message: str) -> None:
        self.path = Path(path)
        self._busy_message = busy_message
        self._mutex = threading.Lock()
        self._fd: int | None = None

    def _descriptor(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return self._fd

    def acquire(self, timeout_s: float | None = None) -> None:
        """Wait for the lock (forever when ``timeout_s`` is None); ``LockBusyError`` when the
        wait runs out."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        if not self._mutex.acquire(timeout=-1 if timeout_s is None else timeout_s):
            raise LockBusyError(self._busy_message)
        try:
            fd = self._descriptor()
            if deadline is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                return
            pause = FIRST_POLL_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LockBusyError(self._busy_message) from None
                    time.sleep(pause)
                    pause = min(pause * 2, LONGEST_POLL_S)
        except BaseException:
            self._mutex.release()
            raise

    def release(self) -> None:
        try:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    @contextlib.contextmanager
    def held(self, timeout_s: float | None = None) -> Iterator[None]:
        self.acquire(timeout_s)
        try:
            yield
        finally:
            self.release()

    def close(self) -> None:
        """Close the lock file (the lock must not be held)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
