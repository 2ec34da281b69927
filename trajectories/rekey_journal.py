"""Re-keys an import published but whose labels have not been carried yet.

A re-import that gives records new ids publishes the new rows first (the workspace) and then
moves labels in the annotation store (another database): two systems, no shared transaction.
So the old -> new id pairs are written here, beside the workspace, in the same write lock as
the publish, and removed only once the store has taken them. If the store is unreachable (a
PostgreSQL outage, a killed command), nothing is lost: the next `faillab import` or `faillab
workspace carry-labels` carries them.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from faillab_core.errors import FaillabError

JOURNAL = "pending-rekeys.json"


class JournalError(FaillabError):
    """The journal file exists but cannot be read as one."""


@dataclass
class PendingRekeys:
    #: Old id -> new id of the same record.
    rekeyed: dict[str, str] = field(default_factory=dict)
    #: Retired ids with no new row (what the store holds on them can only be reported).
    orphaned: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rekeyed or self.orphaned)


def read(root: Path) -> PendingRekeys:
    path = root / JOURNAL
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return PendingRekeys()
    except ValueError as err:
        raise JournalError(f"{path}: not valid JSON ({err}); it lists labels still to carry "
                           "to re-imported trajectories: repair or remove it") from None
    rekeyed, orphaned = data.get("rekeyed"), data.get("orphaned")
    if not isinstance(rekeyed, dict) or not isinstance(orphaned, list):
        raise JournalError(f"{path}: expected {{\"rekeyed\": {{...}}, \"orphaned\": [...]}}")
    return PendingRekeys({str(k): str(v) for k, v in rekeyed.items()}, [str(i) for i in orphaned])


def merged(pending: PendingRekeys, rekeyed: Mapping[str, str],
           orphaned: Iterable[str]) -> PendingRekeys:
    """``pending`` followed by a later import's re-keys: an id re-keyed twice (A -> B, then
    B -> C) goes straight to its latest id, and one whose new id was later retired with no
    successor is orphaned."""
    gone = set(orphaned)
    chained: dict[str, str] = {}
    lost: list[str] = list(pending.orphaned)
    for old, new in pending.rekeyed.items():
        if new in rekeyed:
            chained[old] = rekeyed[new]
        elif new in gone:
            lost.append(old)
        else:
            chained[old] = new
    chained.update(rekeyed)
    lost.extend(gone)
    return PendingRekeys(chained, sorted(set(lost) - set(chained)))


def write(root: Path, pending: PendingRekeys) -> None:
    """Replace the journal (deleted when nothing is pending). Callers hold the workspace's
    write lock."""
    path = root / JOURNAL
    if not pending:
        path.unlink(missing_ok=True)
        return
    text = json.dumps({"rekeyed": dict(sorted(pending.rekeyed.items())),
                       "orphaned": sorted(pending.orphaned)}, indent=1)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


def without(pending: PendingRekeys, settled: Iterable[str]) -> PendingRekeys:
    """``pending`` minus the old ids the store has taken (carried or reported)."""
    done = set(settled)
    return PendingRekeys({o: n for o, n in pending.rekeyed.items() if o not in done},
                         [o for o in pending.orphaned if o not in done])
