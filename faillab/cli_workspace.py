"""``faillab import``, ``demo``, ``score``, ``summary`` and ``list``: the workspace's
trajectories in and out."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from faillab.cli_common import (
    UserError,
    echo_text,
    emit,
    json_option,
    open_workspace,
    settings_for,
    success_source_option,
    workspace_option,
)
from faillab.shared_lock import parts_writer_lock
from faillab.textsafe import terminal_text
from trajectories.importers import FORMATS, ImportProblem


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@workspace_option
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True)
@click.option("--run", default=None, help="Run name (default: from the file name).")
@click.option("--model", default=None, help="Model name (default: from the file or its name).")
@click.option("--skip-invalid", is_flag=True,
              help="Import the valid records; write the rejects with their errors to a file.")
@click.option("--map", "mapping_file", default=None, type=click.Path(path_type=Path),
              help="TOML mapping for JSON/JSONL records that use other field names "
                   "(see docs/format.md).")
@click.option("--tasks", "tasks_file", default=None, type=click.Path(path_type=Path),
              help="Task file (CSV or JSON: id, question, gold_sql, gold_answer) giving task ids "
                   "and ground truth to logs that lack them (LM Studio).")
@json_option
def import_cmd(paths: tuple[Path, ...], workspace: Path | None, fmt: str, run: str | None,
               model: str | None, skip_invalid: bool, mapping_file: Path | None,
               tasks_file: Path | None, as_json: bool) -> None:
    """Import trajectory files: native JSONL, tau-bench/OpenAI chat logs, Inspect AI logs (.eval,
    .json), LM Studio conversations, or any JSON mapped with --map."""
    from tqdm import tqdm

    from trajectories.importers.lmstudio import load_tasks
    from trajectories.importers.mapping import load_mapping

    try:
        mapping = load_mapping(mapping_file) if mapping_file else None
        tasks = load_tasks(tasks_file) if tasks_file else None
    except ImportProblem as problem:
        raise UserError(str(problem)) from None
    ws = open_workspace(workspace)
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.iterdir() if q.suffix in {".json", ".jsonl", ".eval"}))
        else:
            files.append(p)
    # Counts records, so one huge file shows progress too; appears only after half a second.
    bar = tqdm(unit=" trajectories", delay=0.5, disable=as_json, file=sys.stderr)

    def progress(files_done: int, files_total: int, records: int) -> None:
        bar.set_postfix_str(f"file {min(files_done + 1, files_total)}/{files_total}",
                            refresh=False)
        bar.update(records - bar.n)

    try:
        with parts_writer_lock(settings_for(workspace), _say):
            report = ws.import_files(files, fmt=fmt, run=run, model=model,
                                     skip_invalid=skip_invalid, progress=progress,
                                     mapping=mapping, tasks=tasks)
    except ImportProblem as problem:
        raise UserError(f"{problem} (nothing was imported)") from None
    finally:
        bar.close()
    if as_json:
        emit(report.as_json())
        return
    click.echo(f"imported {report.imported}, duplicates {report.duplicates}, "
               f"rejected {report.rejected}")
    if report.rejects_file:
        click.echo(f"rejected records and their errors: {report.rejects_file}", err=True)


@click.command()
@workspace_option
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--tasks", "n_tasks", default=72, show_default=True, type=int)
@click.option("--rollouts", default=3, show_default=True, type=int)
@click.option("--patients", "n_patients", default=2000, show_default=True, type=int)
@click.option("--if-missing", is_flag=True, help="Do nothing when the workspace has data.")
@json_option
def demo(workspace: Path | None, seed: int, n_tasks: int, rollouts: int, n_patients: int,
         if_missing: bool, as_json: bool) -> None:
    """Build the synthetic demo workspace: an EHR database, tasks and simulated agents."""
    from trajectories.demo import generate_demo

    ws = open_workspace(workspace)
    if if_missing and ws.part_files():
        if not as_json:
            click.echo(f"workspace {ws.root} already has trajectories; leaving it as it is")
        else:
            emit({"imported": 0, "skipped": True})
        return
    ws.create()
    result = generate_demo(ws.root, seed=seed, n_tasks=n_tasks, rollouts=rollouts,
                           n_patients=n_patients)
    with parts_writer_lock(settings_for(workspace), _say):
        added, dups = ws.add((t, "demo") for t in result.trajectories)
    if as_json:
        emit({"imported": added, "duplicates": dups, "ehr_database": str(result.ehr_path)})
    else:
        click.echo(f"demo workspace {ws.root}: {added} trajectories, EHR {result.ehr_path}")


@click.command("score")
@workspace_option
@json_option
def score_cmd(workspace: Path | None, as_json: bool) -> None:
    """Re-score every trajectory by exact match with the current scorer."""
    result = open_workspace(workspace).write_scores()
    if as_json:
        emit(result)
    else:
        click.echo(f"scored {result['scored']} trajectories; {result['changed']} changed")


@click.command()
@workspace_option
@success_source_option
@json_option
def summary(workspace: Path | None, success_source: str, as_json: bool) -> None:
    """Counts of trajectories, tasks, runs, failures, unscored trajectories (no ground truth
    and no recorded outcome) and outcome disagreements. 'failed' and 'unscored' follow
    --success-source; when the other source gives different counts they are shown too."""
    from trajectories.workspace import SUCCESS_SOURCES

    ws = open_workspace(workspace)
    data: dict[str, object] = dict(ws.summary(success_source))
    data["success_source"] = success_source
    for other in SUCCESS_SOURCES:
        if other == success_source:
            continue
        alt = ws.summary(other)
        if (alt["failed"], alt["unscored"]) != (data["failed"], data["unscored"]):
            data[f"failed_{other}"] = alt["failed"]
            data[f"unscored_{other}"] = alt["unscored"]
    if as_json:
        emit(data)
    else:
        for key, value in data.items():
            echo_text(f"{key.replace('_', ' ')}: {value}")


_MARKS = {"success": "ok  ", "failure": "FAIL", "unscored": "----"}


@click.command("list")
@workspace_option
@click.option("--failed", is_flag=True, help="Only failed trajectories.")
@click.option("--unscored", is_flag=True,
              help="Only unscored trajectories (no ground truth and no recorded outcome).")
@click.option("--run", default=None)
@click.option("--limit", default=None, type=int)
@success_source_option
@json_option
def list_cmd(workspace: Path | None, failed: bool, unscored: bool, run: str | None,
             limit: int | None, success_source: str, as_json: bool) -> None:
    """List trajectories: 'ok', 'FAIL' or '----' (unscored) with id, run, model and task.
    JSON rows carry 'outcome': success, failure or unscored."""
    rows = open_workspace(workspace).list(failed=failed, unscored=unscored, run=run,
                                          limit=limit, success_source=success_source)
    if as_json:
        emit(rows)
        return
    for r in rows:
        mark = _MARKS[r["outcome"]]
        fields = (str(r[k]) for k in ("id", "run", "model", "task_id"))
        tid, run_name, model, task = (terminal_text(f, keep_newlines=False) for f in fields)
        click.echo(f"{mark} {tid}  {run_name}  {model}  task {task}"
                   + ("  unscored" if r["outcome"] == "unscored" else ""))


@click.group()
def workspace() -> None:
    """Upkeep of the workspace's trajectory parts."""


@workspace.command("compact")
@workspace_option
@click.option("--part-mb", default=None, type=int,
              help="Size of a compacted part, uncompressed, in MB: about the memory compaction "
                   "uses (default 128).")
@json_option
def compact(workspace: Path | None, part_mb: int | None, as_json: bool) -> None:
    """Merge small parts into large parts sorted by id (a lookup then opens one file).

    Imports do this on their own when small parts pile up. Readers are never blocked: the
    new parts appear in one step and the old ones are deleted a few minutes later."""
    from trajectories.workspace import WorkspaceError

    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"{ws.root}: no workspace here (run `faillab import` first)")
    try:
        with parts_writer_lock(settings_for(workspace), _say):
            result = ws.compact(part_mb=part_mb) if part_mb else ws.compact()
    except WorkspaceError as err:
        raise UserError(str(err)) from None
    if as_json:
        emit(result)
    elif result["merged_parts"]:
        click.echo(f"merged {result['merged_parts']} parts ({result['rows']} trajectories) "
                   f"into {result['new_parts']}")
    else:
        click.echo("nothing to compact")
