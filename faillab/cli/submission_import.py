"""``faillab import prediction.json --tasks .../test/data.json``: an EHRSQL-2024 submission with
the benchmark's own task files (``trajectories.importers.ehrsql_submission``). A separate branch
of ``faillab import``: the predictions are executed in the sandbox as they are read, which the
per-record import formats never do."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from faillab.cli.common import UserError, emit, open_workspace, settings_for
from faillab.cli.shared_lock import parts_writer_lock


def is_submission_import(paths: tuple[Path, ...], tasks_file: Path | None) -> bool:
    """One ``prediction.json``-shaped file and the benchmark's ``data.json`` (or its folder)."""
    from trajectories.importers.ehrsql_submission import is_benchmark_task_file, is_submission

    return (tasks_file is not None and len(paths) == 1 and is_submission(paths[0])
            and is_benchmark_task_file(tasks_file))


def import_submission(prediction: Path, tasks_file: Path, workspace: Path | None, *,
                      run: str | None, model: str | None, as_json: bool) -> None:
    from trajectories.importers.ehrsql_submission import load_benchmark, read_submission
    from trajectories.judge import sandbox_executor

    ws = open_workspace(workspace)
    db = ws.ehr_path
    if db is None or not db.is_file():
        raise UserError("an EHRSQL-2024 submission is executed as it is imported: set the "
                        "benchmark's database first ('faillab sandbox use mimic_iv.sqlite')")
    settings = settings_for(workspace)
    try:
        benchmark = load_benchmark(tasks_file)
    except (OSError, ValueError, KeyError) as err:
        raise UserError(f"{tasks_file}: {err}") from None

    def progress(done: int, total: int) -> None:
        if not as_json and sys.stderr.isatty() and (done == total or done % 200 == 0):
            click.echo(f"\rexecuted {done}/{total} queries", err=True, nl=done == total)

    try:
        read = read_submission(prediction, benchmark,
                               sandbox_executor(db, timeout_s=settings.sql_timeout_s),
                               run=run, model=model, progress=progress)
    except (OSError, ValueError) as err:
        raise UserError(f"{prediction}: {err}") from None
    with parts_writer_lock(settings, lambda m: click.echo(m, err=True)):
        added, duplicates = ws.add((traj, str(prediction)) for traj in read.trajectories)
    out = {"format": "ehrsql-2024-submission", "imported": added, "duplicates": duplicates,
           "left_out_no_task": len(read.no_task), "tasks_without_prediction":
           len(read.no_prediction), "left_out_ids": read.no_task[:50]}
    if as_json:
        emit(out)
        return
    click.echo(f"EHRSQL-2024 submission: imported {added}, duplicates {duplicates}; judged by "
               "the ehrsql-2024 profile at the benchmark's clock (2100-12-31 23:59:00)")
    if read.no_task:
        click.echo(f"left out {len(read.no_task)} predictions whose id is not in "
                   f"{tasks_file} (a question changed after the submission), e.g. "
                   + ", ".join(read.no_task[:3]))
    if read.no_prediction:
        click.echo(f"{len(read.no_prediction)} tasks of the split have no prediction")
