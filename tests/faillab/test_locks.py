"""The machine's one file lock: threads and processes exclude each other, a wait with a limit
ends in a clear error, and a killed holder never leaves the lock taken."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from faillab_core.errors import FaillabError
from faillab_core.locks import LockBusyError, MachineLock
from tests.support import REPO

HOLD = """
import sys, time
sys.path.insert(0, {repo!r})
from faillab_core.locks import MachineLock
lock = MachineLock({path!r}, busy_message="busy")
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(repo=str(REPO), path=str(path))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_threads_with_their_own_lock_objects_never_overlap(tmp_path: Path) -> None:
    inside = 0
    overlaps = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, overlaps
        lock = MachineLock(tmp_path / "w.lock", busy_message="busy")
        for _ in range(200):
            with lock.held(5.0):
                with guard:
                    inside += 1
                    overlaps += inside > 1
                time.sleep(0)
                with guard:
                    inside -= 1
        lock.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == 0 and inside == 0


def test_a_wait_with_a_limit_ends_in_the_lock_s_own_message(tmp_path: Path) -> None:
    holder = _holder(tmp_path / "b.lock")
    try:
        lock = MachineLock(tmp_path / "b.lock", busy_message="another import holds it; wait")
        started = time.monotonic()
        with pytest.raises(LockBusyError, match="another import holds it; wait") as err:
            lock.acquire(0.3)
        assert 0.25 < time.monotonic() - started < 5.0
        assert isinstance(err.value, FaillabError)
        # A refused wait leaves nothing half-taken: the same object takes the lock later.
        holder.terminate()
        holder.wait(10)
        lock.acquire(5.0)
        lock.release()
        lock.close()
    finally:
        holder.kill()


def test_a_killed_holder_leaves_the_lock_free(tmp_path: Path) -> None:
    holder = _holder(tmp_path / "k.lock")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(10)
    lock = MachineLock(tmp_path / "k.lock", busy_message="busy")
    with lock.held(5.0):
        assert (tmp_path / "k.lock").exists()
    lock.close()


def test_a_blocking_wait_returns_when_the_holder_lets_go(tmp_path: Path) -> None:
    holder = _holder(tmp_path / "h.lock")
    got = threading.Event()

    def wait() -> None:
        lock = MachineLock(tmp_path / "h.lock", busy_message="busy")
        with lock.held():
            got.set()
        lock.close()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert not got.wait(0.3)
    holder.terminate()
    holder.wait(10)
    waiter.join(10)
    assert got.is_set()
