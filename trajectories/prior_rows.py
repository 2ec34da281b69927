"""The rows an import replaces: those an earlier import of the same file wrote.

Ids are content hashes of the normalised record, so when the importer changes how it reads a
record, re-importing the same file gives that record a new id. Without this the old row would
stay beside the new one (counted twice, its labels orphaned). A row knows where it came from
(``rows.Provenance``: the file's bytes, the record's position, the import's key), so the
re-import finds exactly that file's old rows, writes every record again and retires the old
rows in the same publish. ``match_records`` says which old id became which new one, so the
labels made on the old id can be carried over.

Rows written before provenance existed (NULL columns) are matched by the path they were
imported from, and only when the workspace records these very bytes as imported before (by
this importer or an older one); their new ids are matched by (run, task, rollout) when that
pairing is one to one. Anything else is left alone (``faillab workspace remove`` retires it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from trajectories.import_workers import FileKeys, FileResult
from trajectories.rows import INDEX_SCHEMA

#: What is read of each stored row to find and match the rows an import replaces.
PRIOR_COLUMNS = ("id", "run", "task_id", "rollout", "source_file", "source_sha",
                 "source_record", "import_key")


def read_part_columns(part: Path, columns: tuple[str, ...] | list[str],
                      filesystem: pafs.FileSystem | None) -> pa.Table:
    """Columns of one part; a column the part predates (provenance) reads as NULL."""
    pf = (pq.ParquetFile(part) if filesystem is None
          else pq.ParquetFile(str(part), filesystem=filesystem))
    have = set(pf.schema_arrow.names)
    table = pf.read(columns=[c for c in columns if c in have])
    for name in columns:
        if name not in have:
            table = table.append_column(
                INDEX_SCHEMA.field(name), pa.nulls(table.num_rows, INDEX_SCHEMA.field(name).type))
    return table.select(list(columns))


def basenames(paths: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    return pc.replace_substring_regex(paths, pattern=r"^.*/", replacement="")


@dataclass
class PriorRows:
    """Every stored id, and the stored rows of files named like one being imported."""

    ids: set[str]
    #: PRIOR_COLUMNS plus ``part`` (the part file's name) of the candidate rows.
    candidates: pa.Table
    #: The workspace's imported-source keys (manifest).
    sources: set[str]
    by_path: dict[str, pa.Table] = field(default_factory=dict)

    @classmethod
    def read(cls, parts: list[Path], filesystem: pafs.FileSystem | None,
             paths: list[Path], sources: set[str]) -> PriorRows:
        names = pa.array(sorted({p.name for p in paths}), type=pa.string())
        ids: set[str] = set()
        found: list[pa.Table] = []
        for part in parts:
            # Ids and paths of every row; the rest only of a part holding one of these files.
            table = read_part_columns(part, ("id", "source_file"), filesystem)
            ids.update(table.column("id").to_pylist())
            mask = pc.fill_null(pc.is_in(basenames(table.column("source_file")),
                                         value_set=names), False)
            if not pc.any(mask).as_py():
                continue
            table = read_part_columns(part, PRIOR_COLUMNS, filesystem).filter(mask)
            if table.num_rows:
                found.append(table.append_column(
                    "part", pa.array([part.name] * table.num_rows, type=pa.string())))
        schema = pa.schema([*(INDEX_SCHEMA.field(c) for c in PRIOR_COLUMNS),
                            pa.field("part", pa.string())])
        candidates = pa.concat_tables(found) if found else schema.empty_table()
        return cls(ids, candidates, sources)

    def prior_ids(self, path: Path, keys: FileKeys) -> frozenset[str]:
        """The stored ids an earlier import of this file (these bytes, this name) wrote: by
        an older importer or other options (rows with provenance), or before provenance
        existed (rows without it, from this very path, when these bytes are a known source)."""
        table = self.candidates
        if not table.num_rows:
            return frozenset()
        same_name = pc.equal(basenames(table.column("source_file")), path.name)
        provenance = pc.and_(pc.equal(table.column("source_sha"), keys.content),
                             pc.not_equal(table.column("import_key"), keys.key))
        mask = pc.and_(same_name, pc.fill_null(provenance, False))
        if keys.key in self.sources or any(k in self.sources for k in keys.older):
            legacy = pc.and_(pc.is_null(table.column("source_sha")),
                             pc.equal(table.column("source_file"), str(path)))
            mask = pc.or_(mask, pc.fill_null(legacy, False))
        rows = table.filter(mask)
        self.by_path[str(path)] = rows
        return frozenset(rows.column("id").to_pylist())

    def rows_of(self, path: str) -> pa.Table:
        return self.by_path[path]


@dataclass
class Replacement:
    """What re-importing a file did to its old rows."""

    #: Old rows to retire, by the name of the part holding them.
    retire: dict[str, set[str]] = field(default_factory=dict)
    #: Old id -> new id of the same record (the labels to carry).
    rekeyed: dict[str, str] = field(default_factory=dict)
    #: Old ids retired with no new row to carry their labels to (the record is now rejected,
    #: or a row without provenance could not be paired one to one).
    orphaned: list[str] = field(default_factory=list)
    #: Old rows retired whose id no longer exists (rekeyed or orphaned).
    replaced: int = 0


def match_records(old: pa.Table, result: FileResult, replacement: Replacement) -> None:
    """Add to ``replacement`` the retirement of ``old`` (a file's prior rows) and which new id
    each old id became (same record position; rows without provenance: same run, task and
    rollout, when that is one to one)."""
    positions = result.positions
    new_ids = {p[0] for p in positions if p is not None}
    old_rows = old.to_pylist()
    for row in old_rows:
        replacement.retire.setdefault(row["part"], set()).add(row["id"])
    gone = [r for r in old_rows if r["id"] not in new_ids]
    old_ids = {r["id"] for r in old_rows}
    # New records whose id no stored row of this file had: what a changed id became.
    fresh = Counter((p[1], p[2], p[3]) for p in positions if p is not None and p[0] not in old_ids)
    fresh_id = {(p[1], p[2], p[3]): p[0] for p in positions
                if p is not None and p[0] not in old_ids}
    legacy_claims = Counter((r["run"], r["task_id"], r["rollout"])
                            for r in gone if r["source_record"] is None)
    for row in gone:
        replacement.replaced += 1
        record = row["source_record"]
        new: str | None = None
        if record is not None:
            if 0 <= record < len(positions) and positions[record] is not None:
                new = positions[record][0]
        else:
            triple = (row["run"], row["task_id"], row["rollout"])
            if fresh[triple] == 1 and legacy_claims[triple] == 1:
                new = fresh_id[triple]
        if new is None or new == row["id"]:
            replacement.orphaned.append(row["id"])
        else:
            replacement.rekeyed[row["id"]] = new
