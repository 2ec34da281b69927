"""``faillab sandbox``: run read-only SQL against the workspace's EHR database, build one from
MIMIC-IV CSV files, or point the workspace at an existing DuckDB/SQLite database."""

from __future__ import annotations

import json
from pathlib import Path

import click

from faillab.cli.common import UserError, check_output, settings_for
from faillab_core.settings import Settings
from trajectories.workspace import Workspace


def _ws(workspace: Path | None) -> tuple[Workspace, Settings]:
    settings = settings_for(workspace)
    return Workspace.from_settings(settings), settings


@click.group()
def sandbox() -> None:
    """The EHR database that agent and reference SQL are re-run against."""


@sandbox.command("query")
@click.argument("sql")
@click.option("--workspace", type=click.Path(path_type=Path), default=None)
@click.option("--db", "db", type=click.Path(path_type=Path), default=None,
              help="EHR database file (default: the workspace's).")
@click.option("--timeout", "timeout_s", type=float, default=None)
@click.option("--max-rows", "row_cap", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
def query(sql: str, workspace: Path | None, db: Path | None, timeout_s: float | None,
          row_cap: int | None, as_json: bool) -> None:
    """Run one read-only SQL statement (time-limited, row-capped, no file access)."""
    from trajectories.sql import SandboxError, run_isolated, workspace_reference_time

    ws, settings = _ws(workspace)
    path = db or ws.ehr_path
    if path is None:
        raise UserError(
            "this workspace has no EHR database: run 'faillab demo', "
            "'faillab sandbox build --mimic-dir DIR' or 'faillab sandbox use FILE'"
        )
    try:
        result = run_isolated(path, sql, timeout_s=timeout_s or settings.sql_timeout_s,
                              row_cap=row_cap or settings.sql_row_cap,
                              now=workspace_reference_time(ws.read_settings()))
    except SandboxError as err:
        raise UserError(str(err)) from None
    if as_json:
        click.echo(json.dumps({"columns": result.columns, "rows": result.json_rows(),
                               "truncated": result.truncated,
                               **({"ran_at": result.ran_at} if result.ran_at else {})},
                              default=str))
    else:
        click.echo(result.to_text())
        if result.truncated:
            click.echo(f"(truncated at {len(result.rows)} rows)", err=True)


@sandbox.command("build")
@click.option("--mimic-dir", type=click.Path(path_type=Path, exists=True, file_okay=False),
              required=True, help="Folder with MIMIC-IV hosp/ and icu/ CSV(.gz) files.")
@click.option("--workspace", type=click.Path(path_type=Path), default=None)
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="Database file to write (default: WORKSPACE/ehr.duckdb).")
def build(mimic_dir: Path, workspace: Path | None, output: Path | None) -> None:
    """Build a DuckDB EHR database from MIMIC-IV CSV files and use it for this workspace."""
    from trajectories.ehr_build import MimicBuildError, build_duckdb_from_mimic

    ws, _ = _ws(workspace)
    if output is not None:
        # The EHR database may live in the workspace, but never over the label store.
        check_output(output, settings_for(workspace), "duckdb", inside_workspace=True)
    ws.create()
    out = output or ws.root / "ehr.duckdb"
    try:
        tables = build_duckdb_from_mimic(mimic_dir, out,
                                         progress=lambda t: click.echo(f"  {t}", err=True))
    except MimicBuildError as err:
        raise UserError(str(err)) from None
    ws.set_ehr_database(out)
    click.echo(f"built {out} with {len(tables)} tables")


@sandbox.command("use")
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--workspace", type=click.Path(path_type=Path), default=None)
@click.option("--reference-time", default=None, metavar="'YYYY-MM-DD HH:MM:SS'",
              help="The time SQL that asks for 'now' runs at in this workspace, for tasks that "
                   "name none (default: EHRSQL's 2100-12-31 23:59:00; docs/scoring.md).")
def use(path: Path, workspace: Path | None, reference_time: str | None) -> None:
    """Point the workspace at an existing DuckDB or SQLite EHR database."""
    from trajectories.sql import SandboxError, check_reference_time, workspace_reference_time

    ws, _ = _ws(workspace)
    if reference_time is not None:
        try:
            ws.write_settings(reference_time=check_reference_time(reference_time))
        except SandboxError as err:
            raise UserError(str(err)) from None
    ws.set_ehr_database(path)
    clock = workspace_reference_time(ws.read_settings())
    click.echo(f"workspace {ws.root} re-runs SQL against {path.resolve()}"
               + (f", its clock at {clock}" if clock else ""))
