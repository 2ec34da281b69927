"""``faillab workspace``: upkeep of the workspace's Parquet parts."""

from __future__ import annotations

from pathlib import Path

import click

from faillab.cli_common import UserError, emit, json_option, open_workspace, workspace_option
from trajectories.workspace import COMPACT_PART_MB, WorkspaceError


@click.group()
def workspace() -> None:
    """Upkeep of the workspace's trajectory parts."""


@workspace.command("compact")
@workspace_option
@click.option("--part-mb", default=COMPACT_PART_MB, show_default=True, type=int,
              help="Size of a compacted part, uncompressed: about the memory compaction uses.")
@json_option
def compact(workspace: Path | None, part_mb: int, as_json: bool) -> None:
    """Merge small parts into large parts sorted by id (a lookup then opens one file).

    Imports do this on their own when small parts pile up. Readers are never blocked: the
    new parts appear in one step and the old ones are deleted a few minutes later."""
    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"{ws.root}: no workspace here (run `faillab import` first)")
    try:
        result = ws.compact(part_mb=part_mb)
    except WorkspaceError as err:
        raise UserError(str(err)) from None
    if as_json:
        emit(result)
    elif result["merged_parts"]:
        click.echo(f"merged {result['merged_parts']} parts ({result['rows']} trajectories) "
                   f"into {result['new_parts']}")
    else:
        click.echo("nothing to compact")
