"""The ``faillab`` command: a thin face over the domain packages.

With ``--json`` a command prints exactly one JSON value on stdout; messages go to stderr.
Errors the user can fix print one line and exit with status 1 (never a traceback).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from faillab.cli_common import (
    UserError,
    emit,
    json_option,
    open_workspace,
    settings_for,
    workspace_option,
)
from trajectories.importers import FORMATS, ImportProblem
from trajectories.workspace import WorkspaceError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """EHR Failure Lab: see, label and audit LLM-agent trajectories on clinical databases."""


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@workspace_option
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True)
@click.option("--run", default=None, help="Run name (default: from the file name).")
@click.option("--model", default=None, help="Model name (default: from the file or its name).")
@click.option("--skip-invalid", is_flag=True,
              help="Import the valid records; write the rejects with their errors to a file.")
@json_option
def import_cmd(paths: tuple[Path, ...], workspace: Path | None, fmt: str, run: str | None,
               model: str | None, skip_invalid: bool, as_json: bool) -> None:
    """Import trajectory files (native JSONL or OpenAI-style chat logs)."""
    from tqdm import tqdm

    ws = open_workspace(workspace)
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.iterdir() if q.suffix in {".json", ".jsonl"}))
        else:
            files.append(p)
    # Counts records, so one huge file shows progress too; appears only after half a second.
    bar = tqdm(unit=" trajectories", delay=0.5, disable=as_json, file=sys.stderr)

    def progress(files_done: int, files_total: int, records: int) -> None:
        bar.set_postfix_str(f"file {min(files_done + 1, files_total)}/{files_total}",
                            refresh=False)
        bar.update(records - bar.n)

    try:
        report = ws.import_files(files, fmt=fmt, run=run, model=model,
                                 skip_invalid=skip_invalid, progress=progress)
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


@main.command()
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
    added, dups = ws.add((t, "demo") for t in result.trajectories)
    if as_json:
        emit({"imported": added, "duplicates": dups, "ehr_database": str(result.ehr_path)})
    else:
        click.echo(f"demo workspace {ws.root}: {added} trajectories, EHR {result.ehr_path}")


@main.command("score")
@workspace_option
@json_option
def score_cmd(workspace: Path | None, as_json: bool) -> None:
    """Re-score every trajectory by exact match with the current scorer."""
    result = open_workspace(workspace).write_scores()
    if as_json:
        emit(result)
    else:
        click.echo(f"scored {result['scored']} trajectories; {result['changed']} changed")


@main.command()
@workspace_option
@json_option
def summary(workspace: Path | None, as_json: bool) -> None:
    """Counts of trajectories, tasks, runs, failures and outcome disagreements."""
    data = open_workspace(workspace).summary()
    if as_json:
        emit(data)
    else:
        for key, value in data.items():
            click.echo(f"{key.replace('_', ' ')}: {value}")


@main.command("list")
@workspace_option
@click.option("--failed", is_flag=True, help="Only failed trajectories.")
@click.option("--run", default=None)
@click.option("--limit", default=None, type=int)
@json_option
def list_cmd(workspace: Path | None, failed: bool, run: str | None, limit: int | None,
             as_json: bool) -> None:
    """List trajectories."""
    rows = open_workspace(workspace).list(failed=failed, run=run, limit=limit)
    if as_json:
        emit(rows)
        return
    for r in rows:
        mark = "ok  " if r["success"] else "FAIL"
        click.echo(f"{mark} {r['id']}  {r['run']}  {r['model']}  task {r['task_id']}")


@main.command()
@workspace_option
@click.option("--port", default=8501, show_default=True, type=int)
@click.option("--headless/--no-headless", default=True, show_default=True)
def serve(workspace: Path | None, port: int, headless: bool) -> None:
    """Serve the workbench (Streamlit) on http://localhost:PORT."""
    import app

    settings = settings_for(workspace)
    env = {**os.environ, "FAILLAB_WORKSPACE": str(settings.workspace.resolve())}
    main_py = Path(app.__file__).with_name("main.py")
    cmd = [sys.executable, "-m", "streamlit", "run", str(main_py), "--server.port", str(port),
           "--server.headless", "true" if headless else "false"]
    raise SystemExit(subprocess.call(cmd, env=env))


# Sub-command groups, one line each (imported late so `faillab --help` stays fast to load).
from faillab.cli_audit import audit  # noqa: E402
from faillab.cli_evidence import evidence  # noqa: E402
from faillab.cli_labels import labels  # noqa: E402
from faillab.cli_prelabel import prelabel  # noqa: E402
from faillab.cli_sandbox import sandbox  # noqa: E402
from faillab.cli_stats import stats  # noqa: E402
from faillab.cli_users import users  # noqa: E402

main.add_command(audit)
main.add_command(evidence)
main.add_command(prelabel)
main.add_command(sandbox)
main.add_command(stats)
main.add_command(users)
main.add_command(labels)


def run() -> None:
    """Entry point: domain errors the user can fix become one line on stderr and status 1."""
    try:
        main(standalone_mode=True)
    except WorkspaceError as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    run()
