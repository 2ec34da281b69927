"""Garbage collection (``faillab workspace gc``): what killed writers left in the parts folder or
under the object-store prefix, listed and removed once it is older than the grace period.

An import killed with ``kill -9`` leaves the parts it staged: hidden ``.part-*.tmp`` files in a
folder, ``part-*.parquet`` objects no manifest lists in an object store. Any later writer
deletes such leftovers too (``Parts.clean_stale_staging``), but a team that only reads (app
replicas) never writes; this lists them on demand. It is deliberately conservative: nothing
the current manifest lists (visible or retired within the grace period) and nothing younger
than the grace period (an import still writing, perhaps on another machine) is touched, and
the manifest is read again just before deleting.

``GarbageCollection`` is given the workspace's ``Parts`` (the manifest, the write lock).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from trajectories.parts import (
    MANIFEST,
    PART_GLOB,
    RETIRED_GRACE_S,
    Parts,
    WorkspaceError,
    store_errors,
)


@dataclass(frozen=True)
class Leftover:
    """An object or file no manifest needs."""

    name: str
    age_s: float
    size: int
    kind: str  # "unlisted" (a part nobody published), "staging" (a hidden .tmp), "retired"


@dataclass
class GarbageReport:
    location: str
    removed: list[Leftover]  # (or, in a dry run, what would be removed)
    young: list[Leftover]  # leftovers younger than the grace period: kept
    dry_run: bool
    grace_s: float

    @property
    def removed_bytes(self) -> int:
        return sum(item.size for item in self.removed)


class GarbageCollection:
    """The garbage-collecting side of a ``Workspace``, over its ``Parts``."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    def leftovers(self, *, now: float | None = None) -> list[Leftover]:
        """Every part object or staging file that the manifest does not list as visible or
        retired within the grace period (retired parts past it are listed, kind "retired")."""
        now = time.time() if now is None else now
        manifest = self.parts.read_manifest()
        if manifest is None and self.parts.remote is not None:
            # No manifest: either nothing was ever published or the manifest was lost; the
            # parts would all look unlisted, so nothing is called a leftover.
            return []
        visible = set(manifest["parts"]) if manifest else set()
        retired = {n: float(at) for n, at in (manifest or {}).get("retired", {}).items()}
        found: list[Leftover] = []
        for name, mtime, size in self._part_entries():
            age = now - mtime
            if name.startswith("."):
                found.append(Leftover(name, age, size, "staging"))
            elif name in visible or manifest is None:
                continue  # without a manifest (an old folder workspace) every part is visible
            elif name in retired:
                if now - retired[name] > RETIRED_GRACE_S:
                    found.append(Leftover(name, now - retired[name], size, "retired"))
            else:
                found.append(Leftover(name, age, size, "unlisted"))
        return found

    def collect_garbage(self, *, dry_run: bool = False, grace_s: float = RETIRED_GRACE_S,
                        now: float | None = None) -> GarbageReport:
        """Remove the leftovers older than ``grace_s`` (list them only, with ``dry_run``)."""
        now = time.time() if now is None else now
        with self.parts.write_lock(clean=False):
            found = self.leftovers(now=now)
            old = [item for item in found if item.age_s > grace_s]
            young = [item for item in found if item.age_s <= grace_s]
            if not dry_run and old:
                # Read again: a part published since the listing is never deleted.
                manifest = self.parts.read_manifest() or {}
                listed = set(manifest.get("parts", []))
                old = [item for item in old if item.name not in listed]
                for item in old:
                    self._delete_leftover(item.name)
                gone = {item.name for item in old if item.kind == "retired"}
                if gone and manifest:
                    self.parts.write_manifest(manifest["parts"], {
                        n: at for n, at in manifest.get("retired", {}).items()
                        if n not in gone})
            self.parts.changed()
        return GarbageReport(self.parts.trajectories_location, old, young, dry_run, grace_s)

    def _part_entries(self) -> list[tuple[str, float, int]]:
        """(name, modification time, bytes) of the part objects or files and staging files."""
        if self.parts.remote is not None:
            with store_errors():
                return [(n, m, s) for n, m, s in self.parts.remote.infos(".parquet")
                        if n.startswith("part-")]
        if not self.parts.parts_dir.is_dir():
            return []
        paths = [*self.parts.parts_dir.glob(PART_GLOB), *self.parts.parts_dir.glob(".part-*.tmp"),
                 *self.parts.parts_dir.glob(f".{MANIFEST}.*.tmp")]
        entries = []
        for path in paths:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue  # removed meanwhile
            entries.append((path.name, stat.st_mtime, stat.st_size))
        return sorted(entries)

    def _delete_leftover(self, name: str) -> None:
        if self.parts.remote is not None:
            with store_errors():
                self.parts.remote.delete(name)
            return
        try:
            (self.parts.parts_dir / name).unlink(missing_ok=True)
        except OSError as err:
            raise WorkspaceError(f"{self.parts.parts_dir / name}: cannot remove: "
                                 f"{err.strerror or err}") from None
