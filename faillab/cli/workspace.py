"""``faillab import``, ``demo``, ``score``, ``summary`` and ``list``: the workspace's
trajectories in and out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from faillab.cli.common import (
    UserError,
    echo_text,
    emit,
    json_option,
    open_workspace,
    people_verdicts,
    settings_for,
    success_source_option,
    workspace_option,
)
from faillab.cli.gc import gc
from faillab.cli.shared_lock import parts_writer_lock
from faillab_core.textsafe import terminal_text
from trajectories.importers import FORMATS, ImportProblem

if TYPE_CHECKING:
    from trajectories.workspace import ImportReport, Workspace


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
              help="Task file (CSV, JSON or JSONL: question, gold answer, gold SQL, optional id, "
                   "conversation file and verdict) matched to every trajectory of every format; "
                   "its rows give task ids, ground truth and verdicts (docs/format.md). With an "
                   "EHRSQL-2024 prediction.json: the benchmark's data.json, label.json and "
                   "answer.json beside it (docs/scoring.md).")
@click.option("--require-tasks", is_flag=True,
              help="With --tasks: fail the import when any trajectory matches no task row.")
@click.option("--verdict-source", default="human", show_default=True,
              help="Who gave the verdicts of a task file or results table without a "
                   "verdict_source column.")
@json_option
def import_cmd(paths: tuple[Path, ...], workspace: Path | None, fmt: str, run: str | None,
               model: str | None, skip_invalid: bool, mapping_file: Path | None,
               tasks_file: Path | None, require_tasks: bool, verdict_source: str,
               as_json: bool) -> None:
    """Import trajectory files: native JSONL, tau-bench/OpenAI chat logs, Inspect AI logs (.eval,
    .json), LM Studio conversations, results tables (CSV/TSV of final answers), agent SDK traces
    (OpenTelemetry GenAI, OpenInference, Langfuse, Anthropic messages, OpenAI Agents,
    smolagents, LangSmith), or any JSON mapped with --map."""
    from tqdm import tqdm

    from trajectories.importers.errors import ImportProblems
    from trajectories.importers.mapping import load_mapping
    from trajectories.importers.tasks import load_tasks
    from trajectories.objectstore import ObjectStoreError
    from trajectories.parts import WorkspaceUnreachableError
    from trajectories.workspace import WorkspaceError

    if require_tasks and tasks_file is None:
        raise UserError("--require-tasks needs --tasks FILE")
    from faillab.cli.submission_import import import_submission, is_submission_import

    if is_submission_import(paths, tasks_file):
        # An EHRSQL-2024 submission with the benchmark's files: executed as it is imported.
        assert tasks_file is not None
        import_submission(paths[0], tasks_file, workspace, run=run, model=model,
                          as_json=as_json)
        return
    try:
        mapping = load_mapping(mapping_file) if mapping_file else None
        tasks = load_tasks(tasks_file, verdict_source=verdict_source) if tasks_file else None
    except ImportProblem as problem:
        raise UserError(str(problem)) from None
    ws = open_workspace(workspace)
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.iterdir() if q.suffix in IMPORTED_SUFFIXES
                                and (tasks_file is None or q.resolve() != tasks_file.resolve())))
        else:
            files.append(p)
    # Counts records, so one huge file shows progress too; appears only after half a second,
    # and only on a terminal: in a log or a pipe each refresh is a line, and an error after a
    # slow start would no longer be the one line a script reads.
    bar = tqdm(unit=" trajectories", delay=0.5, disable=as_json or not sys.stderr.isatty(),
               file=sys.stderr)

    def progress(files_done: int, files_total: int, records: int) -> None:
        bar.set_postfix_str(f"file {min(files_done + 1, files_total)}/{files_total}",
                            refresh=False)
        bar.update(records - bar.n)

    try:
        with parts_writer_lock(settings_for(workspace), _say):
            report = ws.import_files(files, fmt=fmt, run=run, model=model,
                                     skip_invalid=skip_invalid, progress=progress,
                                     mapping=mapping, tasks=tasks,
                                     require_tasks=require_tasks)
    except ImportProblems as problems:
        bar.close()
        for each in problems.problems:
            click.echo(f"error: {terminal_text(str(each), keep_newlines=False)}", err=True)
        raise UserError(f"{len(problems.problems)} files have problems (nothing was "
                        "imported; --skip-invalid imports the rest)") from None
    except ImportProblem as problem:
        raise UserError(f"{problem} (nothing was imported)") from None
    except WorkspaceUnreachableError as err:
        raise UserError(f"{err}; the import did not complete: {RUN_AGAIN}") from None
    except WorkspaceError as err:
        raise UserError(str(err)) from None
    except (ObjectStoreError, OSError) as err:
        # The store (or the disk) failed under the import: nothing half-imported is visible,
        # and a retry recognises what an earlier attempt published.
        raise UserError(f"{err}; the import did not complete: {RUN_AGAIN}") from None
    finally:
        bar.close()
    try:
        carried = _carry_labels(workspace, ws)
    except UserError:
        # The rows are in; say so before the error about the labels.
        click.echo(f"imported {report.imported}, replaced {report.replaced}, "
                   f"duplicates {report.duplicates}, rejected {report.rejected}", err=True)
        raise
    if as_json:
        emit({**report.as_json(), **report.details(), **carried})
        return
    click.echo(f"imported {report.imported}, replaced {report.replaced}, "
               f"duplicates {report.duplicates}, rejected {report.rejected}")
    _say_runs_and_tasks(report)
    if report.replaced:
        click.echo(f"replaced: {report.replaced} stored rows were read differently by this "
                   "importer (their records now have other ids or were rejected); the old "
                   "rows are retired", err=True)
    _say_carried(carried)
    if report.rejects_file:
        click.echo(f"rejected records and their errors: {report.rejects_file}", err=True)
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)


#: What a folder given to ``faillab import`` is searched for.
IMPORTED_SUFFIXES = frozenset({".json", ".jsonl", ".eval", ".csv", ".tsv"})
#: What an import stopped by an unanswering store tells the person to do.
RUN_AGAIN = "run the same command again once the store answers (nothing is imported twice)"
#: Unmatched trajectories listed by name before the rest are counted.
_UNMATCHED_SHOWN = 20


def _say_runs_and_tasks(report: ImportReport) -> None:
    """Which runs the import read, and how the task file matched."""
    if report.runs:
        shown = ", ".join(f"{terminal_text(name)} ({count})"
                          for name, count in sorted(report.runs.items())[:10])
        more = len(report.runs) - 10
        click.echo(f"runs: {shown}" + (f" and {more} more" if more > 0 else ""))
    if report.task_matched is None:
        return
    unmatched = report.task_unmatched
    click.echo(f"tasks: {report.task_matched} trajectories matched a task row, "
               f"{len(unmatched)} did not" + (" (their task ids are keys of their questions; "
                                              "--require-tasks refuses them)" if unmatched
                                              else ""))
    for line in unmatched[:_UNMATCHED_SHOWN]:
        click.echo(f"  unmatched: {terminal_text(line)}", err=True)
    if len(unmatched) > _UNMATCHED_SHOWN:
        click.echo(f"  ... and {len(unmatched) - _UNMATCHED_SHOWN} more (--json lists them "
                   "all)", err=True)


def _store_exists(workspace: Path | None) -> bool:
    return settings_for(workspace).has_annotation_store()


def _carry_labels(workspace: Path | None, ws: Workspace) -> dict[str, object]:
    """Move what the annotation store holds on re-keyed ids to their new ids, and list what it
    holds on ids that are gone (see labeling.store.rekey). Works from the workspace's journal
    of pending re-keys (trajectories.rekey_journal), so re-keys an earlier import could not
    hand over (the store was unreachable) are carried now too."""
    from trajectories.workspace import WorkspaceError

    try:
        pending = ws.pending_rekeys()
    except WorkspaceError as err:
        raise UserError(str(err)) from None
    if not pending:
        return {}
    settled = [*pending.rekeyed, *pending.orphaned]
    if not _store_exists(workspace):
        ws.settle_rekeys(settled)  # no annotation store yet: no label to carry
        return {}
    # Only now: the store's modules take ~0.8 s to import, which every import paid at its end.
    from sqlalchemy.exc import SQLAlchemyError

    from faillab.cli.users import open_annotations
    from labeling.store.errors import StoreError
    from trajectories.rekey_journal import JOURNAL

    try:
        store = open_annotations(workspace)
        try:
            moved = store.trajectory_ids.rekey(
                pending.rekeyed, actor=None,
                reason="re-import: the importer reads this record differently, so its id "
                       "changed")
            pointing_nowhere = store.trajectory_ids.referencing([*pending.orphaned, *moved.left])
        finally:
            store.close()
    except (StoreError, SQLAlchemyError, OSError) as err:
        raise UserError(
            f"the labels of {len(pending.rekeyed)} re-imported trajectories were not carried to "
            f"their new ids: the annotation store failed ({err}). Nothing is lost: the id pairs "
            f"are kept in {ws.root / JOURNAL}; run `faillab workspace carry-labels` once the "
            "store is reachable (the next import also carries them)") from None
    ws.settle_rekeys(settled)
    return {"labels_carried": {old: {"to": pending.rekeyed[old], **n}
                               for old, n in moved.carried.items()},
            "labels_not_carried": pointing_nowhere}


def _say_carried(carried: dict[str, object]) -> None:
    moved = carried.get("labels_carried") or {}
    nowhere = carried.get("labels_not_carried") or {}
    assert isinstance(moved, dict) and isinstance(nowhere, dict)
    for old, info in moved.items():
        what = ", ".join(f"{n} {k}" for k, n in info.items() if k != "to")
        click.echo(f"carried {what} from {old} to {info['to']}", err=True)
    for old, counts in nowhere.items():
        what = ", ".join(f"{n} {k}" for k, n in counts.items())
        click.echo(f"warning: {what} on {old} now point at no trajectory", err=True)


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
    """Re-score every trajectory by exact match and the judge with the current rules."""
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
    _refuse_missing(workspace, ws)
    # People's verdicts win over the recorded and judged outcomes (trajectories.outcome).
    people = people_verdicts(workspace) if ws.exists() else {}
    data: dict[str, object] = dict(ws.summary(success_source, people))
    data["success_source"] = success_source
    for other in SUCCESS_SOURCES:
        if other == success_source:
            continue
        alt = ws.summary(other, people)
        if (alt["failed"], alt["unscored"]) != (data["failed"], data["unscored"]):
            data[f"failed_{other}"] = alt["failed"]
            data[f"unscored_{other}"] = alt["unscored"]
    if as_json:
        emit(data)
    else:
        for key, value in data.items():
            echo_text(f"{key.replace('_', ' ')}: {value}")


def _refuse_missing(workspace: Path | None, ws: Workspace) -> None:
    """A workspace with no trajectories where the store labels some is an error, not zero."""
    if ws.exists() or not _store_exists(workspace):
        return
    from faillab.cli.users import open_annotations
    from labeling.consistency import missing_workspace

    store = open_annotations(workspace)
    try:
        problem = missing_workspace(ws, store)
    finally:
        store.close()
    if problem:
        raise UserError(problem)


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
    ws = open_workspace(workspace)
    rows = ws.list(failed=failed, unscored=unscored, run=run, limit=limit,
                   success_source=success_source,
                   people=people_verdicts(workspace) if ws.exists() else {})
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


@workspace.command("remove")
@workspace_option
@click.option("--id", "ids", multiple=True, help="A trajectory id (repeatable).")
@click.option("--run", "runs", multiple=True, help="Every trajectory of a run (repeatable).")
@click.option("--source", "sources", multiple=True,
              help="Every trajectory imported from this file: the path as it was imported, or "
                   "a file whose bytes were imported (repeatable).")
@click.option("--yes", is_flag=True, help="Remove without asking.")
@json_option
def remove(workspace: Path | None, ids: tuple[str, ...], runs: tuple[str, ...],
           sources: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Remove trajectories by id, run or source file, all at once (readers see them all or
    none); reports what went and which labels now point at no trajectory."""
    from trajectories.workspace import WorkspaceError

    if not (ids or runs or sources):
        raise UserError("say what to remove: --id, --run or --source")
    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"{ws.trajectories_location}: no workspace here "
                        "(run `faillab import` first)")
    try:
        planned = ws.remove(ids=ids, runs=runs, sources=sources, confirm=False)
        if not planned.ids:
            if as_json:
                emit({"removed": 0, "ids": [], "labels_not_carried": {}})
            else:
                click.echo("nothing matches; nothing removed")
            return
        if not yes:
            if as_json or not sys.stdin.isatty():
                raise UserError(f"would remove {len(planned.ids)} trajectories; "
                                "add --yes to remove them")
            runs_text = ", ".join(f"{r} ({n})" for r, n in sorted(planned.runs.items()))
            click.confirm(f"Remove {len(planned.ids)} trajectories (runs: {runs_text})?",
                          abort=True, err=True)
        with parts_writer_lock(settings_for(workspace), _say):
            report = ws.remove(ids=ids, runs=runs, sources=sources)
    except WorkspaceError as err:
        raise UserError(str(err)) from None
    nowhere: dict[str, dict[str, int]] = {}
    if _store_exists(workspace) and report.ids:
        from faillab.cli.users import open_annotations

        store = open_annotations(workspace)
        try:
            nowhere = store.trajectory_ids.referencing(report.ids)
        finally:
            store.close()
    if as_json:
        emit({"removed": len(report.ids), "ids": report.ids, "runs": report.runs,
              "labels_not_carried": nowhere})
        return
    runs_text = ", ".join(f"{r} ({n})" for r, n in sorted(report.runs.items()))
    click.echo(f"removed {len(report.ids)} trajectories (runs: {runs_text})")
    for tid, counts in sorted(nowhere.items()):
        what = ", ".join(f"{n} {k}" for k, n in counts.items())
        click.echo(f"warning: {what} on {tid} now point at no trajectory", err=True)


@workspace.command("carry-labels")
@workspace_option
@json_option
def carry_labels(workspace: Path | None, as_json: bool) -> None:
    """Carry labels to re-imported trajectories' new ids when an import could not (the
    annotation store was unreachable); reports labels on ids that are gone."""
    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"{ws.trajectories_location}: no workspace here "
                        "(run `faillab import` first)")
    carried = _carry_labels(workspace, ws)
    if as_json:
        emit({"labels_carried": carried.get("labels_carried", {}),
              "labels_not_carried": carried.get("labels_not_carried", {})})
        return
    if not carried:
        click.echo("nothing to carry")
    _say_carried(carried)


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
        raise UserError(f"{ws.trajectories_location}: no workspace here "
                        "(run `faillab import` first)")
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


workspace.add_command(gc)
