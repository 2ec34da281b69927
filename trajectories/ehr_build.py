"""Build a DuckDB EHR database from MIMIC-IV CSV files.

Expected layout (as distributed by PhysioNet): ``<mimic_dir>/hosp/*.csv.gz`` and
``<mimic_dir>/icu/*.csv.gz`` (plain ``.csv`` works too). Each file becomes one table named after
the file stem in the ``main`` schema, e.g. ``hosp/patients.csv.gz`` -> ``patients``.

The source directory is only read. The database is built in a temporary file next to
``out_path`` and moved into place with ``os.replace`` once complete, so a crash or an error never
leaves a half-built database at ``out_path``.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import duckdb

from faillab_core.errors import FaillabError

__all__ = ["MIMIC_MODULES", "MimicBuildError", "build_duckdb_from_mimic", "find_mimic_csvs"]

MIMIC_MODULES = ("hosp", "icu")

# Code columns that look numeric in many rows but are identifiers: type inference would drop
# their leading zeros (ICD-9 "0389", NDC "00338004904", DRG "003") or make them numbers in a
# subset where every value happens to be digits. They are always read as text.
TEXT_COLUMNS = frozenset(
    {
        "icd_code",
        "drg_code",
        "hcpcs_cd",
        "code",
        "ndc",
        "gsn",
        "formulary_drug_cd",
        "product_code",
        "provider_id",
        "admit_provider_id",
        "order_provider_id",
        "enter_provider_id",
        "poe_id",
        "pharmacy_id",
        "emar_id",
    }
)

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MimicBuildError(FaillabError):
    """Building the EHR database failed; the message is one line."""


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".csv.gz", ".csv"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def find_mimic_csvs(mimic_dir: Path) -> dict[str, Path]:
    """Table name -> CSV file for every MIMIC CSV under ``hosp/`` and ``icu/``.

    A ``.csv.gz`` wins over a ``.csv`` of the same name. Two modules defining the same table is
    an error, since the tables would silently overwrite each other.
    """
    root = Path(mimic_dir)
    found: dict[str, Path] = {}
    for module in MIMIC_MODULES:
        folder = root / module
        if not folder.is_dir():
            continue
        candidates = sorted(folder.glob("*.csv.gz")) + sorted(folder.glob("*.csv"))
        for path in candidates:
            if not path.is_file():
                continue
            name = _stem(path)
            if not _TABLE_NAME.match(name):
                continue
            previous = found.get(name)
            if previous is not None:
                if previous.parent == path.parent:
                    continue  # same module: the .csv.gz sorted first and is kept
                raise MimicBuildError(f"table {name!r} is defined twice: {previous} and {path}")
            found[name] = path
    return found


def _csv_header(path: Path) -> list[str]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            return next(csv.reader(text), [])
    except (OSError, EOFError) as exc:
        raise MimicBuildError(f"cannot read {path}: {exc}") from None


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _read_csv_sql(path: Path, sample_size: int) -> str:
    # Only override columns the file really has: read_csv rejects types for unknown columns.
    header = _csv_header(path)
    overrides = [c for c in header if c.lower() in TEXT_COLUMNS]
    options = [
        "header = true",
        "auto_detect = true",
        f"sample_size = {int(sample_size)}",
    ]
    if overrides:
        pairs = ", ".join(f"{_sql_string(c)}: 'VARCHAR'" for c in overrides)
        options.append(f"types = {{{pairs}}}")
    return f"read_csv({_sql_string(str(path))}, {', '.join(options)})"


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def build_duckdb_from_mimic(
    mimic_dir: Path,
    out_path: Path,
    *,
    tables: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    sample_size: int = -1,
) -> list[str]:
    """Build (or rebuild) ``out_path`` from the MIMIC-IV CSVs in ``mimic_dir``.

    ``tables`` limits the build to those table names (case-insensitive); naming a table that
    has no CSV is an error. ``sample_size`` is passed to DuckDB's type detection; the default
    ``-1`` scans every row, which is slower but never guesses a type that a later row breaks.
    Returns the names of the tables built, in build order.
    """
    mimic_dir = Path(mimic_dir)
    out_path = Path(out_path)
    if not mimic_dir.is_dir():
        raise MimicBuildError(f"MIMIC directory not found: {mimic_dir}")
    available = find_mimic_csvs(mimic_dir)
    if not available:
        raise MimicBuildError(
            f"no MIMIC-IV CSV files in {mimic_dir} (expected hosp/*.csv.gz and icu/*.csv.gz)"
        )

    if tables is None:
        selected = sorted(available)
    else:
        by_lower = {name.lower(): name for name in available}
        missing = [t for t in tables if t.lower() not in by_lower]
        if missing:
            raise MimicBuildError(f"no CSV for table(s) {', '.join(missing)} in {mimic_dir}")
        selected = list(dict.fromkeys(by_lower[t.lower()] for t in tables))
        if not selected:
            raise MimicBuildError("no tables requested")

    out_path.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as the destination so os.replace is an atomic rename on one file system.
    tmp_path = out_path.parent / f".{out_path.name}.{uuid.uuid4().hex}.building"
    say = progress or (lambda _msg: None)
    built: list[str] = []
    try:
        con = duckdb.connect(str(tmp_path))
        try:
            for i, name in enumerate(selected, start=1):
                csv_path = available[name]
                say(f"[{i}/{len(selected)}] loading {name} from {csv_path.name}")
                con.execute(
                    f'CREATE TABLE "{name}" AS SELECT * FROM {_read_csv_sql(csv_path, sample_size)}'
                )
                row = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()
                say(f"[{i}/{len(selected)}] {name}: {row[0] if row else 0} rows")
                built.append(name)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        # A WAL left by an older database at out_path would be replayed onto the new file.
        _remove_quietly(Path(f"{out_path}.wal"))
        os.replace(tmp_path, out_path)
    except duckdb.Error as exc:
        message = " ".join(str(exc).split())
        raise MimicBuildError(f"building {out_path} failed: {message}") from None
    finally:
        _remove_quietly(tmp_path)
        _remove_quietly(Path(f"{tmp_path}.wal"))
    say(f"built {out_path} with {len(built)} tables")
    return built
