"""Compaction: merging a workspace's small parts into large parts sorted by id that cover
disjoint id ranges (a lookup by id then opens one file), by hand (``faillab workspace compact``)
or after an import that leaves too many small parts. The old parts are retired in the same
publish and deleted after a grace period, so readers are never blocked or broken.

``Compaction`` is given the workspace's ``Parts``: it writes and publishes through them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from trajectories.parts import Parts
from trajectories.rows import INDEX_SCHEMA, PART_OPTIONS, part_name

#: Compacted parts hold about this many rows; smaller parts are merged by compaction.
COMPACT_ROWS = 131_072
#: ... and about this many MB uncompressed (payloads dominate), so one fits in memory.
COMPACT_PART_MB = 128
#: An import that leaves more small parts than this compacts them.
COMPACT_AT_PARTS = 64


class Compaction:
    """The compaction side of a ``Workspace``, over its ``Parts``."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    def compaction_candidates(self) -> list[Path]:
        """Visible parts below ``COMPACT_ROWS`` rows: what compaction merges."""
        return [p for p in self.parts.part_files()
                if self.parts.parquet_file(p).metadata.num_rows < COMPACT_ROWS]

    def maybe_compact(self) -> dict[str, int] | None:
        """Compact when small parts have piled up (more than ``COMPACT_AT_PARTS``)."""
        if len(self.compaction_candidates()) <= COMPACT_AT_PARTS:
            return None
        return self.compact()

    def compact(self, *, part_mb: int = COMPACT_PART_MB) -> dict[str, int]:
        """Merge every small part into parts sorted by id that cover disjoint id ranges (a
        lookup by id then opens one file), each at most ``COMPACT_ROWS`` rows and about
        ``part_mb`` MB uncompressed. One id range is read at a time (row-group statistics
        skip the rest), so memory stays near one output part whatever the workspace size.
        The result is published in one manifest rename and the old parts are deleted after
        a grace period: readers are never blocked or broken."""
        with self.parts.write_lock():
            small = self.compaction_candidates()
            if len(small) < 2:
                return {"merged_parts": 0, "new_parts": 0, "rows": 0}
            all_ids = pa.chunked_array(
                [pq.read_table(str(p), columns=["id"], filesystem=self.parts.fs).column("id")
                 for p in small]).combine_chunks()
            ordered = pc.array_sort_indices(all_ids)
            sorted_ids = all_ids.take(ordered)
            rows = len(sorted_ids)
            metas = [self.parts.parquet_file(p).metadata for p in small]
            raw_bytes = sum(m.row_group(i).total_byte_size
                            for m in metas for i in range(m.num_row_groups))
            n_out = max(1, -(-rows // COMPACT_ROWS), -(-raw_bytes // (part_mb * 1024 * 1024)))
            bounds = [sorted_ids[(k * rows) // n_out].as_py() for k in range(1, n_out)]
            del all_ids, ordered, sorted_ids
            import pyarrow.dataset as ds  # here, not at the top: see Parts.rewrite_without

            dataset = ds.dataset([str(p) for p in small], format="parquet",
                                 schema=INDEX_SCHEMA, filesystem=self.parts.fs)
            finals: list[Path] = []
            staged: list[tuple[Path, Path]] = []
            try:
                for i, (lo, hi) in enumerate(zip([None, *bounds], [*bounds, None],
                                                 strict=True)):
                    expr = None
                    if lo is not None:
                        expr = pc.field("id") >= lo
                    if hi is not None:
                        upper = pc.field("id") < hi
                        expr = upper if expr is None else expr & upper
                    table = dataset.to_table(filter=expr).sort_by("id")
                    name = part_name().replace(".parquet", f"-c{i:04d}.parquet")
                    final = self.parts.parts_dir / name
                    tmp = final if self.parts.remote else self.parts.parts_dir / f".{name}.tmp"
                    pq.write_table(table, str(tmp), **PART_OPTIONS, filesystem=self.parts.fs)
                    staged.append((tmp, final))
                    del table
                for tmp, final in staged:
                    self.parts.place(tmp, final)
                    finals.append(final)
                self.parts.publish(finals, removed=small)
            except BaseException:
                for tmp, _ in staged:
                    self.parts.discard(tmp)
                raise
            self.parts.changed()
            return {"merged_parts": len(small), "new_parts": len(finals), "rows": rows}

