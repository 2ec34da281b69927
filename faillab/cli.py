"""The ``faillab`` command: a thin face over the domain packages.

With ``--json`` a command prints exactly one JSON value on stdout; messages go to stderr.
Errors the user can fix print one line and exit with status 1 (never a traceback).
"""

from __future__ import annotations

import os
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
from faillab.textsafe import terminal_text
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


@main.command("list")
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


# The project's Streamlit server settings, passed as flags so they apply wherever `faillab serve`
# is started (Streamlit reads .streamlit/config.toml only from the current directory).
SERVER_FLAGS: tuple[tuple[str, str], ...] = (
    ("browser.gatherUsageStats", "false"),
    ("client.showErrorDetails", "none"),
    ("client.toolbarMode", "minimal"),
    ("server.enableXsrfProtection", "true"),
    ("server.enableCORS", "true"),
    ("server.runOnSave", "false"),
    ("server.fileWatcherType", "none"),
    ("global.developmentMode", "false"),
)
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    return host in LOOPBACK or host.startswith("127.")


def serve_command(main_py: Path, host: str, port: int, headless: bool) -> list[str]:
    cmd = [sys.executable, "-m", "streamlit", "run", str(main_py),
           "--server.address", host, "--server.port", str(port),
           "--server.headless", "true" if headless else "false"]
    for key, value in SERVER_FLAGS:
        cmd += [f"--{key}", value]
    return cmd


@main.command()
@workspace_option
@click.option("--host", default=None,
              help="Address to listen on (default: setting host, 127.0.0.1).")
@click.option("--port", default=8501, show_default=True, type=int)
@click.option("--headless/--no-headless", default=True, show_default=True)
@click.option("--allow-unauthenticated-network", is_flag=True,
              help="Listen beyond localhost even with auth none (anyone who can reach it can "
                   "read and label everything).")
def serve(workspace: Path | None, host: str | None, port: int, headless: bool,
          allow_unauthenticated_network: bool) -> None:
    """Serve the workbench (Streamlit) on http://HOST:PORT."""
    import app

    settings = settings_for(workspace)
    host = host or settings.host
    if settings.auth not in {"none", "password", "oidc"}:
        raise UserError(f"unknown auth mode {settings.auth!r}; expected none, password or oidc")
    if settings.auth == "none" and not is_loopback(host) and not allow_unauthenticated_network:
        raise UserError(
            f"refusing to listen on {host} with auth none (anyone on the network could use it); "
            "set FAILLAB_AUTH=password or oidc, or pass --allow-unauthenticated-network")
    env = {**os.environ, "FAILLAB_WORKSPACE": str(settings.workspace.resolve())}
    main_py = Path(app.__file__).with_name("main.py")
    cmd = serve_command(main_py, host, port, headless)
    # Become the server instead of starting a child: a signal to `faillab serve` (Ctrl-C, a
    # supervisor's SIGTERM) reaches Streamlit itself and never leaves an orphaned server behind.
    os.execve(cmd[0], cmd, env)


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
main.add_command(__import__("faillab.cli_workspace").cli_workspace.workspace)


def run() -> None:
    """Entry point: domain errors the user can fix become one line on stderr and status 1."""
    try:
        main(standalone_mode=True)
    except WorkspaceError as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    run()
