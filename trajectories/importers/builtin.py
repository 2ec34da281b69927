"""The formats faillab reads from its first releases, registered with the importer registry:
native JSONL, tau-bench/OpenAI chat logs, LM Studio exports, Inspect AI logs, results tables.
Their parsers live in their own modules; this file only says how each is recognised and read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.fast_chat import prepare_chat
from trajectories.importers.inspect_ai import (
    eval_archive_samples,
    is_eval_archive,
    json_log_samples,
    looks_like_inspect_log,
    parse_inspect_sample,
)
from trajectories.importers.lmstudio import looks_like_lmstudio, parse_lmstudio
from trajectories.importers.native import parse_native
from trajectories.importers.openai_chat import identity_from_filename, parse_openai_chat
from trajectories.importers.registry import (
    FileSniff,
    ImportFormat,
    Parsed,
    ReadOptions,
    RecordContext,
    register,
    rejected,
)
from trajectories.importers.results import is_results_table, results_items

# --------------------------------------------------------------------------- native


def _read_native(record: Any, ctx: RecordContext) -> Iterator[Parsed]:
    options = ctx.options
    if options.run or options.model:
        record = _override_run(record, options.run, options.model)
    try:
        traj = parse_native(record)
    except ValueError as err:
        yield rejected(ctx.path, ctx.location, err, ctx.raw(record))
        return
    yield Parsed(ctx.location, traj, None, "")


def _override_run(record: Any, run: str | None, model: str | None) -> Any:
    if not isinstance(record, dict) or not isinstance(record.get("run"), dict):
        return record
    new_run = dict(record["run"])
    if run:
        new_run["name"] = run
    if model:
        new_run["model"] = model
    return {**record, "run": new_run}


# --------------------------------------------------------------------------- chat logs


def _is_chat(record: Any) -> bool:
    return isinstance(record, dict) and "messages" in record and "steps" not in record


def _read_chat(record: Any, ctx: RecordContext) -> Iterator[Parsed]:
    options = ctx.options
    identity = ctx.file_state.get("identity")
    if identity is None:  # the file name says run and model: read it once per file
        identity = ctx.file_state["identity"] = identity_from_filename(
            ctx.path, options.run, options.model)
    try:
        prepared = prepare_chat(record, identity) if options.prepare and ctx.plain else None
        if prepared is not None:
            yield Parsed(ctx.location, None, None, "", prepared)
            return
        traj = parse_openai_chat(record, identity)
    except ValueError as err:
        yield rejected(ctx.path, ctx.location, err, ctx.raw(record))
        return
    yield Parsed(ctx.location, traj, None, "")


# --------------------------------------------------------------------------- LM Studio


def _read_lmstudio(record: Any, ctx: RecordContext) -> Iterator[Parsed]:
    try:
        traj = parse_lmstudio(record, path=ctx.path, run=ctx.options.run,
                              model=ctx.options.model)
    except ValueError as err:
        yield rejected(ctx.path, ctx.location, err, ctx.raw(record))
        return
    yield Parsed(ctx.location, traj, None, "")


# --------------------------------------------------------------------------- Inspect


def _inspect_items(path: Path, samples: Iterator[tuple[str, dict[str, Any], Any]],
                   options: ReadOptions) -> Iterator[Parsed]:
    """One ``Parsed`` per Inspect sample (its location is ``sample <id> epoch <n>``)."""
    for location, header, sample in samples:
        try:
            traj = parse_inspect_sample(sample, header, stem=path.stem, run=options.run,
                                        model=options.model)
        except ValueError as err:
            yield rejected(path, location, err, RecordContext(
                path, location, options, None, False).raw(sample))
            continue
        yield Parsed(location, traj, None, "")


def _read_inspect_archive(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    yield from _inspect_items(path, eval_archive_samples(path), options)


def _read_inspect_log(record: Any, ctx: RecordContext) -> Iterator[Parsed]:
    if not looks_like_inspect_log(record):  # named with --format inspect, but it is not one
        yield Parsed(ctx.location, None, ImportProblem(
            str(ctx.path), "expected an Inspect eval log (an object with 'eval' naming task "
            "and model, and 'samples')", ctx.location), ctx.raw(record))
        return
    yield from _inspect_items(ctx.path, json_log_samples(record), ctx.options)


# --------------------------------------------------------------------------- results tables


def _read_results(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    """A results table's rows (``trajectories.importers.results``), one ``Parsed`` each."""
    for location, traj, problem, raw in results_items(path, run=options.run, model=options.model,
                                                      mapping=options.mapping):
        if problem is not None:
            yield rejected(path, location, ValueError(problem), raw)
        else:
            yield Parsed(location, traj, None, "")


def _is_results(sniff: FileSniff) -> bool:
    return is_results_table(sniff.path)


def _is_eval_archive(sniff: FileSniff) -> bool:
    return is_eval_archive(sniff.path)


NATIVE = register(ImportFormat(
    "native", "faillab's own trajectory JSONL (docs/format.md)",
    read_record=_read_native, priority=1000))
OPENAI_CHAT = register(ImportFormat(
    "openai-chat", "tau-bench-style OpenAI chat logs with tool calls",
    detect_record=_is_chat, read_record=_read_chat, priority=300))
LMSTUDIO = register(ImportFormat(
    "lmstudio", "LM Studio conversation exports",
    detect_record=looks_like_lmstudio, read_record=_read_lmstudio, priority=200))
INSPECT = register(ImportFormat(
    "inspect", "Inspect AI evaluation logs (.eval archives, .json logs)",
    detect_file=_is_eval_archive, read_file=_read_inspect_archive,
    detect_record=looks_like_inspect_log, read_record=_read_inspect_log, priority=100))
RESULTS = register(ImportFormat(
    "results", "results tables (CSV/TSV of final answers)",
    detect_file=_is_results, read_file=_read_results, takes_mapping=True, priority=100))
