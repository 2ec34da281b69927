"""The importer registry: format names are defined once, ``--format`` lists what is registered,
and a format registered from outside is detected and read without touching ``detect.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from faillab.cli.workspace import import_cmd
from trajectories.importers import registry
from trajectories.importers.detect import FORMATS, iter_file
from trajectories.importers.native import parse_native
from trajectories.importers.registry import (
    FileSniff,
    ImportFormat,
    Parsed,
    ReadOptions,
    RecordContext,
)

NATIVE_SAMPLE = Path(__file__).resolve().parents[2] / "data" / "native-sample.jsonl"


def test_format_names_come_from_the_registry() -> None:
    assert ("auto", *registry.names()) == FORMATS
    for name in ("native", "openai-chat", "lmstudio", "inspect", "results"):
        assert name in registry.names()
    option = next(p for p in import_cmd.params if p.name == "fmt")
    assert isinstance(option.type, click.Choice)
    assert tuple(option.type.choices) == FORMATS


def test_a_name_registers_once() -> None:
    native = registry.get("native")
    with pytest.raises(ValueError, match="already registered"):
        registry.register(native)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ImportFormat("auto", "x", read_record=native.read_record))


def test_a_format_needs_a_reader_and_a_way_to_choose_between_two() -> None:
    with pytest.raises(ValueError, match="no reader"):
        ImportFormat("nothing", "x")
    with pytest.raises(ValueError, match="needs detect_file"):
        ImportFormat("both", "x", read_file=lambda path, options: iter(()),
                     read_record=lambda record, ctx: iter(()))


def _native_lines(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    """A file format: the native sample wrapped as {"wrapped": record} lines."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        record: Any = json.loads(line)["wrapped"]
        yield Parsed(f"line {number}", parse_native(record), None, "")


def _is_wrapped(sniff: FileSniff) -> bool:
    return '"wrapped"' in sniff.text and isinstance(sniff.first_value, dict) \
        and "wrapped" in sniff.first_value


def _record_reader(record: Any, ctx: RecordContext) -> Iterator[Parsed]:
    yield Parsed(ctx.location, parse_native(record["inner"]), None, "")


@pytest.fixture()
def plugged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two formats registered for one test only (the registry is process-wide)."""
    monkeypatch.setattr(registry, "_FORMATS", dict(registry._FORMATS))
    registry.register(ImportFormat("wrapped", "native records under 'wrapped'",
                                   detect_file=_is_wrapped, read_file=_native_lines))
    registry.register(ImportFormat("inner", "native records under 'inner'",
                                   detect_record=lambda r: isinstance(r, dict) and "inner" in r,
                                   read_record=_record_reader, priority=50))


def test_a_registered_format_is_detected_and_read(plugged: None, tmp_path: Path) -> None:
    records = [json.loads(line) for line in NATIVE_SAMPLE.read_text().splitlines() if line]
    wrapped = tmp_path / "wrapped.jsonl"
    wrapped.write_text("".join(json.dumps({"wrapped": r}) + "\n" for r in records))
    inner = tmp_path / "inner.jsonl"
    inner.write_text("".join(json.dumps({"inner": r}) + "\n" for r in records))
    expected = [t.id for t in (parse_native(r) for r in records)]
    for path in (wrapped, inner):
        items = list(iter_file(path))
        assert [item.trajectory.id for item in items if item.trajectory] == expected
    # Named explicitly, a format reads what auto-detection would give to another.
    native_items = list(iter_file(NATIVE_SAMPLE, "native"))
    assert [i.trajectory.id for i in native_items if i.trajectory] == expected
