"""``faillab evidence``: the first-divergence finder over the failed trajectories of a file."""

from __future__ import annotations

import json
from pathlib import Path

import click

from faillab.cli_common import UserError


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per failed trajectory.")
def evidence(path: Path, as_json: bool) -> None:
    """First diverging step, diverging part and suggested category for each failure in PATH."""
    from labeling.evidence import find_divergence
    from trajectories.importers import read_file

    if not path.is_file():
        raise UserError(f"no such trajectory file: {path}")
    parsed = read_file(path)
    for location, traj in parsed.trajectories:
        out = traj.outcome
        if out is None or (out.success is not False and (out.reward is None or out.reward >= 1)):
            continue
        found = find_divergence(traj).to_dict()
        found["location"] = location
        found["task"] = traj.task.id
        if as_json:
            click.echo(json.dumps(found, sort_keys=True))
        else:
            click.echo(
                f"{location}\t{found['category'] or '-'}\t{found['confidence']:.2f}\t"
                f"{found['reason']}"
            )
