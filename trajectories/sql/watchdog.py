"""A thread that interrupts a running query once its time budget is spent."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Watchdog"]


class Watchdog:
    """Calls ``interrupt`` once ``timeout_s`` has passed and keeps calling it until released.

    Repeating matters: an interrupt that lands just before the engine starts executing would
    otherwise be lost and the query would run unbounded.
    """

    def __init__(self, timeout_s: float, interrupt: Callable[[], None]) -> None:
        self._timeout_s = max(float(timeout_s), 0.0)
        self._interrupt = interrupt
        self._done = threading.Event()
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="sql-sandbox-watchdog", daemon=True)

    def _run(self) -> None:
        if self._done.wait(self._timeout_s):
            return
        self.fired = True
        while True:
            try:
                self._interrupt()
            except Exception:
                # A closed connection just means the query is over.
                return
            if self._done.wait(0.05):
                return

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
