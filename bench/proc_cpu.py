"""CPU seconds used by process trees, read from /proc (Linux): on a shared machine the
difference of two readings is the work an action cost, whatever the load."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def _table() -> tuple[dict[int, int], dict[int, float]]:
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    return parent, cpu


def _under(parent: dict[int, int], root: int) -> set[int]:
    found, todo = {root}, [root]
    while todo:
        pid = todo.pop()
        kids = [c for c, p in parent.items() if p == pid and c not in found]
        found.update(kids)
        todo.extend(kids)
    return found


def tree_cpu(servers: Iterable[int]) -> dict[str, float]:
    """CPU seconds so far of the ``servers`` process trees, and of every other process started
    from this one (Chromium and Playwright's driver: the browser side)."""
    parent, cpu = _table()
    server: set[int] = set()
    for pid in servers:
        server |= _under(parent, pid)
    browser = _under(parent, os.getpid()) - server - {os.getpid()}
    return {"server": sum(cpu.get(p, 0.0) for p in server),
            "browser": sum(cpu.get(p, 0.0) for p in browser)}
