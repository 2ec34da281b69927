"""``faillab workspace gc``: list and remove what killed imports left behind (parts nobody
published, hidden staging files) once it is past the grace period; see ``trajectories.gc``."""

from __future__ import annotations

from pathlib import Path

import click

from faillab.cli.common import (
    UserError,
    emit,
    json_option,
    open_workspace,
    settings_for,
    workspace_option,
)
from faillab.cli.shared_lock import parts_writer_lock


def _say(message: str) -> None:
    click.echo(message, err=True)


def _age(seconds: float) -> str:
    if seconds >= 7200:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{max(seconds, 0):.0f} s"


@click.command("gc")
@workspace_option
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@json_option
def gc(workspace: Path | None, dry_run: bool, as_json: bool) -> None:
    """Remove what killed imports left behind: parts no manifest lists and staging files,
    once older than the grace period (5 min); younger ones may belong to an import still
    running and are kept. Nothing a manifest lists is ever removed."""
    from trajectories.workspace import WorkspaceError

    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"{ws.trajectories_location}: no workspace here "
                        "(run `faillab import` first)")
    try:
        with parts_writer_lock(settings_for(workspace), _say):
            report = ws.collect_garbage(dry_run=dry_run)
    except WorkspaceError as err:
        raise UserError(str(err)) from None
    if as_json:
        emit({"location": report.location, "dry_run": dry_run,
              "removed" if not dry_run else "would_remove": [
                  {"name": i.name, "kind": i.kind, "bytes": i.size, "age_s": round(i.age_s)}
                  for i in report.removed],
              "kept_young": [i.name for i in report.young]})
        return
    for item in report.removed:
        click.echo(f"{'would remove' if dry_run else 'removed'} {item.name} ({item.kind}, "
                   f"{item.size:,} bytes, {_age(item.age_s)} old)")
    verb = "would remove" if dry_run else "removed"
    click.echo(f"{report.location}: {verb} {len(report.removed)} leftovers "
               f"({report.removed_bytes:,} bytes)")
    if report.young:
        click.echo(f"kept {len(report.young)} leftovers younger than "
                   f"{_age(report.grace_s)} (an import may still be writing them); run "
                   "again later", err=True)
