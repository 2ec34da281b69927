"""``faillab prelabel``: propose a failure category for every failed trajectory.

Results go to the annotation store, which is also the cache: running again sends only what is
missing, so an interrupted or aborted run is resumed by running the same command.

Privacy interlock: the heuristic labeller works offline. With ``--labeler gemini`` the privacy
notice is printed to stderr first, and nothing is sent unless ``--yes-send-data`` is given (or
``FAILLAB_ALLOW_EXTERNAL_LLM=1`` is set), for the Developer API and for Vertex AI alike.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from faillab.cli_common import UserError, emit, json_option, settings_for, workspace_option


@click.command("prelabel")
@click.option("--labeler", "labeller", type=click.Choice(["heuristic", "gemini"]),
              default="heuristic", show_default=True,
              help="heuristic: offline rules. gemini: an online model (see the privacy notice).")
@click.option("--model", default=None,
              help="Gemini model (default: $FAILLAB_GEMINI_MODEL, else gemini-2.5-pro).")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="Most Gemini requests in flight at once.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Send at most N trajectories this run (already labelled ones are free).")
@click.option("--taxonomy", "taxonomy_path", default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Taxonomy JSON file (default: the built-in default taxonomy).")
@click.option("--vertex/--no-vertex", default=None,
              help="Use Vertex AI (default: when $GOOGLE_CLOUD_PROJECT is set).")
@click.option("--project", default=None, help="Vertex AI project.")
@click.option("--location", default=None, help="Vertex AI location.")
@click.option("--yes-send-data", "yes_send_data", is_flag=True,
              help="Acknowledge the privacy notice: allow sending trajectories to Gemini.")
@json_option
@workspace_option
def prelabel(labeller: str, model: str | None, concurrency: int, limit: int | None,
             taxonomy_path: Path | None, vertex: bool | None, project: str | None,
             location: str | None, yes_send_data: bool, as_json: bool,
             workspace: Path | None) -> None:
    """Pre-label the workspace's failed trajectories (cached, resumable).

    With --json prints {"labelled", "cached", "failed", "calls"}; "calls" counts the API
    requests this run made. Token usage and estimated cost are kept with the run record.
    """
    from tqdm import tqdm

    from labeling.prelabel.runner import PrelabelRunAborted
    from labeling.prelabel.service import (
        PrelabelOptions,
        PrelabelServiceError,
        RunProgress,
        privacy_text,
        run_prelabelling,
    )
    from labeling.store import open_store
    from trajectories.workspace import Workspace

    settings = settings_for(workspace)
    try:
        options = PrelabelOptions(
            labeller=labeller, model=model, concurrency=concurrency, limit=limit,
            taxonomy_path=taxonomy_path, vertex=vertex, project=project, location=location,
            allow_external=yes_send_data,
        ).with_defaults(settings)
    except PrelabelServiceError as err:
        raise UserError(str(err)) from None
    notice = privacy_text(options)
    if notice:
        # Always, even when the data was already acknowledged: the person running the command
        # should see where the data goes every time.
        click.echo(f"privacy: {notice}", err=True)

    ws = Workspace(settings.workspace)
    if not ws.exists():
        raise UserError(f"no workspace at {ws.root}: import trajectories or run 'faillab demo'")
    if not settings.database_url:
        settings.workspace.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.annotations_url())
    bar = tqdm(total=0, unit="traj", disable=as_json, file=sys.stderr, delay=0.2)

    def progress(p: RunProgress) -> None:
        if bar.total != p.total:
            bar.reset(total=p.total)
        bar.n = p.done
        bar.set_postfix(calls=p.calls, failed=p.failed, refresh=False)
        bar.refresh()

    try:
        outcome = run_prelabelling(ws, store, options, progress=progress)
    except PrelabelServiceError as err:
        raise UserError(str(err)) from None
    except PrelabelRunAborted as err:
        s = err.stats
        raise UserError(f"{err} (kept {s.labelled} new labels; run the command again to resume)"
                        ) from None
    finally:
        bar.close()
        store.close()

    s = outcome.stats
    if as_json:
        emit({"labelled": s.labelled, "cached": s.cached, "failed": s.failed, "calls": s.calls})
        return
    click.echo(f"labelled {s.labelled}, cached {s.cached}, failed {s.failed}; "
               f"{s.calls} API calls")
    click.echo(f"tokens: {s.input_tokens} in, {s.output_tokens} out; estimated cost "
               f"${s.estimated_cost_usd:.4f} (list prices, an estimate) [run {outcome.run_id}]")
    for line in s.errors[:10]:
        click.echo(f"failed: {line}", err=True)
    if len(s.errors) > 10:
        click.echo(f"... and {len(s.errors) - 10} more failures (run again to retry them)",
                   err=True)
