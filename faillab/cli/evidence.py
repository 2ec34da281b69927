"""``faillab evidence``: the first-divergence finder over the failed trajectories of a file."""

from __future__ import annotations

import json
from pathlib import Path

import click

from faillab.cli.common import UserError, people_verdicts, settings_for
from trajectories.workspace import Workspace


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--workspace", type=click.Path(path_type=Path), default=None)
@click.option("--db", "db", type=click.Path(path_type=Path), default=None,
              help="EHR database to execute on (default: the workspace's, if it has one).")
@click.option("--no-exec", "no_exec", is_flag=True,
              help="Compare structure and recorded observations only; execute nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per failed trajectory.")
def evidence(path: Path, workspace: Path | None, db: Path | None, no_exec: bool,
             as_json: bool) -> None:
    """First diverging step, diverging part, evidence rows and suggested category for each
    failure in PATH. The reference and agent SQL run read-only in the SQL sandbox."""
    from contextlib import nullcontext

    from trajectories.evidence import Probe, find_divergence
    from trajectories.importers import read_file
    from trajectories.outcome import trajectory_success
    from trajectories.sql import SandboxError

    if not path.is_file():
        raise UserError(f"no such trajectory file: {path}")
    ehr: Path | None = None
    if not no_exec:
        ehr = db if db is not None else Workspace.from_settings(settings_for(workspace)).ehr_path
        if db is not None and not db.is_file():
            raise UserError(f"no such EHR database: {db}")
    parsed = read_file(path)
    people = people_verdicts(workspace)
    try:
        opened = Probe.open(ehr) if ehr is not None else nullcontext(None)
        with opened as probe:
            for location, traj in parsed.trajectories:
                # The one outcome rule: people's verdicts on the id, else the record's
                # verdict, else the judge's; only failures have a divergence to find.
                if trajectory_success(traj, people) is not False:
                    continue
                found = find_divergence(traj, probe=probe).to_dict()
                found["location"] = location
                found["task"] = traj.task.id
                if as_json:
                    click.echo(json.dumps(found, sort_keys=True))
                else:
                    click.echo(
                        f"{location}\t{found['category'] or '-'}\t{found['confidence']:.2f}\t"
                        f"{found['reason']}"
                    )
    except SandboxError as err:
        raise UserError(f"cannot open the EHR database: {err}") from None
