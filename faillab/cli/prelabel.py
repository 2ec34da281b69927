"""``faillab prelabel``: propose a failure category for every failed trajectory.

Results go to the annotation store, which is also the cache: running again sends only what is
missing, so an interrupted or aborted run is resumed by running the same command.

``--batch`` sends the missing items through Gemini's Batch API instead (half price, answers
within a day): the first run shows the estimated cost and submits, later runs of the same
command collect what has finished (``--wait`` polls until everything is in).

Privacy interlock: the heuristic labeller works offline. With ``--labeler gemini`` the privacy
notice is printed to stderr first, and nothing is sent unless ``--yes-send-data`` is given (or
``FAILLAB_ALLOW_EXTERNAL_LLM=1`` is set), for the Developer API and for Vertex AI alike. With
``--labeler openai-compatible`` the notice names the server's address; a local or private
address (the team's own machines) needs no acknowledgement, any other address does.

The run options are defined once, in ``opinions.prelabel.options.OPTIONS``; this module turns
them into click options for the visible command and for the hidden worker command the app
launches (``faillab prelabel-worker``).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import click

from faillab.cli.common import UserError, emit, json_option, settings_for, workspace_option
from faillab_core.textsafe import terminal_text
from opinions.prelabel.options import OPTIONS, OptionSpec, PrelabelOptions

if TYPE_CHECKING:
    from faillab_core.settings import Settings
    from labeling.store import Store
    from trajectories.workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])

_DEFAULTS = PrelabelOptions()


def _click_option(spec: OptionSpec) -> Callable[[F], F]:
    default = getattr(_DEFAULTS, spec.field)
    if spec.kind == "flag":
        return click.option(spec.flag, spec.field, is_flag=True, help=spec.help)
    if spec.kind == "switch":
        return click.option(f"{spec.flag}/--no-{spec.flag[2:]}", spec.field, default=None,
                            help=spec.help)
    kind: click.ParamType | type = str
    if spec.kind == "choice":
        kind = click.Choice(list(spec.choices))
    elif spec.kind == "count":
        kind = click.IntRange(min=spec.minimum)
    elif spec.kind == "path":
        kind = click.Path(dir_okay=False, path_type=Path)
    return click.option(spec.flag, spec.field, type=kind, default=default,
                        show_default=default is not None, help=spec.help)


def prelabel_options(func: F) -> F:
    """Every run option of ``OPTIONS``, as click options named by their field."""
    for spec in reversed(OPTIONS):
        func = _click_option(spec)(func)
    return func


def _options(params: dict[str, Any], settings: Settings) -> PrelabelOptions:
    from opinions.prelabel.run_errors import PrelabelServiceError

    try:
        return PrelabelOptions.from_params(params).with_defaults(settings)
    except PrelabelServiceError as err:
        raise UserError(str(err)) from None


@click.command("prelabel")
@prelabel_options
@click.option("--batch", is_flag=True,
              help="Gemini only: submit the missing items as Batch API jobs (half price, "
                   "answers within a day); run again to collect what has finished.")
@click.option("--wait", is_flag=True,
              help="With --batch: poll until every job has finished and is collected.")
@click.option("--status", is_flag=True,
              help="Show the latest pre-label runs and any Batch API jobs waiting to be "
                   "collected, then exit; nothing is labelled or sent.")
@json_option
@workspace_option
def prelabel(batch: bool, wait: bool, status: bool, as_json: bool, workspace: Path | None,
             **params: Any) -> None:
    """Pre-label the workspace's failed trajectories (cached, resumable).

    With --json prints {"labelled", "cached", "failed", "calls"}; "calls" counts the API
    requests this run made. Token usage and estimated cost are kept with the run record.
    """
    from labeling.store import open_store
    from opinions.prelabel.consent import privacy_text
    from trajectories.workspace import Workspace

    settings = settings_for(workspace)
    if status:
        _status(settings, as_json=as_json)
        return
    options = _options(params, settings)
    if wait and not batch:
        raise UserError("--wait only applies to --batch")
    notice = privacy_text(options)
    if notice:
        # Always, even when the data was already acknowledged: the person running the command
        # should see where the data goes every time.
        click.echo(f"privacy: {notice}", err=True)

    ws = Workspace.from_settings(settings)
    if not ws.exists():
        raise UserError(f"no workspace at {ws.trajectories_location}: import trajectories or "
                        "run 'faillab demo'")
    if not settings.database_url:
        settings.workspace.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.annotations_url())
    try:
        if batch:
            _batch(ws, store, options, wait=wait, as_json=as_json)
        else:
            _interactive(ws, store, options, as_json=as_json)
    finally:
        store.close()


def _status(settings: Settings, *, as_json: bool, runs: int = 10) -> None:
    """The latest runs as the store records them (a run whose worker stopped beating reads as
    interrupted) and the Batch API jobs the workspace's state file still waits for."""
    from labeling.store import open_store
    from opinions.prelabel.batch_state import BatchError, load_state, state_path

    if not settings.database_url and not settings.workspace.exists():
        raise UserError(f"no workspace at {settings.workspace}")
    store = open_store(settings.annotations_url())
    try:
        latest = store.prelabels.latest_runs(runs)
    finally:
        store.close()
    try:
        state = load_state(state_path(settings.workspace))
    except BatchError as err:
        raise UserError(str(err)) from None
    jobs = [{"name": j.name, "state": j.state, "items": len(j.keys)}
            for j in (state.open_jobs if state else [])]
    if as_json:
        emit({"runs": [{k: v for k, v in vars(r).items() if k != "pid"} for r in latest],
              "batch": {"model": state.model, "open_jobs": jobs} if state else None})
        return
    if not latest:
        click.echo("no pre-label runs yet")
    for r in latest:
        cost = f", estimated cost ${r.estimated_cost:.4f}" if r.estimated_cost else ""
        click.echo(terminal_text(
            f"run {r.id}  {r.status:<11} {r.labeller} {r.model}  started "
            f"{r.started_at:%Y-%m-%d %H:%M} UTC  {r.done}/{r.total} done: labelled "
            f"{r.labelled}, cached {r.cached}, failed {r.failed}; {r.calls} calls{cost}"))
    if jobs:
        click.echo(f"Batch API ({state.model if state else ''}): {len(jobs)} job(s) to collect; "
                   "run 'faillab prelabel --labeler gemini --batch' to collect what has finished")
        for job in jobs:
            click.echo(terminal_text(f"  {job['name']}  {job['state']}  {job['items']} items"))


def _interactive(ws: Workspace, store: Store, options: PrelabelOptions, *, as_json: bool) -> None:
    from tqdm import tqdm

    from opinions.prelabel.run_errors import PrelabelRunAborted, PrelabelServiceError
    from opinions.prelabel.service import RunProgress, run_prelabelling

    # On a terminal only (a log or a pipe would get a line per refresh).
    bar = tqdm(total=0, unit="traj", disable=as_json or not sys.stderr.isatty(),
               file=sys.stderr, delay=0.2)

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

    s = outcome.stats
    chooses_format = _chooses_format(options)
    if as_json:
        out: dict[str, Any] = {"labelled": s.labelled, "cached": s.cached, "failed": s.failed,
                               "calls": s.calls}
        if chooses_format:
            out["structured_output"] = outcome.structured_output
        emit(out)
        return
    click.echo(f"labelled {s.labelled}, cached {s.cached}, failed {s.failed}; "
               f"{s.calls} API calls")
    click.echo(f"tokens: {s.input_tokens} in, {s.output_tokens} out; estimated cost "
               f"${s.estimated_cost_usd:.4f} (list prices, an estimate) [run {outcome.run_id}]")
    if chooses_format:
        click.echo(_structured_output_line(outcome.structured_output,
                                           outcome.structured_output_refused))
    _echo_errors(s.errors, 10)


def _chooses_format(options: PrelabelOptions) -> bool:
    """Whether the run's backend negotiates its answers' format (so the run reports it)."""
    from llm import backend

    return options.uses_llm and backend(options.labeller).chooses_format


def _structured_output_line(mode: str | None, refused: tuple[str, ...]) -> str:
    from llm import describe_structured_output

    line = f"structured output: {describe_structured_output(mode)}"
    if refused:
        line += f"; the server refused {', '.join(refused)} first"
    return line


def _echo_errors(errors: list[str], most: int) -> None:
    for line in errors[:most]:
        click.echo(f"failed: {line}", err=True)
    if len(errors) > most:
        click.echo(f"... and {len(errors) - most} more failures (run again to retry them)",
                   err=True)


def _batch(ws: Workspace, store: Store, options: PrelabelOptions, *, wait: bool,
           as_json: bool) -> None:
    from opinions.prelabel.batch import BatchError, BatchReport, advance_batch
    from opinions.prelabel.run_errors import PrelabelServiceError

    def show_plan(report: BatchReport) -> None:
        # Before anything is submitted (and also when consent is missing), so that the person
        # sees what the run would cost first.
        click.echo(f"batch: {report.to_submit} trajectories to submit, about "
                   f"{report.estimated_input_tokens:,} input tokens; estimated cost "
                   f"${report.estimated_cost_usd:.4f} (batch list prices, an estimate)", err=True)

    try:
        report = advance_batch(ws, store, options, wait=wait, on_plan=show_plan)
    except (PrelabelServiceError, BatchError) as err:
        raise UserError(str(err)) from None
    if as_json:
        emit(report.as_dict())
        return
    click.echo(report.summary())
    _echo_errors(report.errors, 10)


# -- the hidden worker the app launches ----------------------------------------------------------


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Raised inside the run, so the service marks the record failed on the way out.
    raise KeyboardInterrupt(f"signal {signum}")


@click.command("prelabel-worker", hidden=True)
@prelabel_options
@click.option("--run-id", type=int, default=None,
              help="Continue this prelabel_runs record (the app creates it first).")
@workspace_option
def prelabel_worker(run_id: int | None, workspace: Path | None, **params: Any) -> None:
    """Out-of-process pre-labelling, as the app launches it (not for interactive use).

    Progress goes to the run record, messages to stderr. Without --run-id a new record is
    created and its id printed on stdout when the run finishes. Exit status: 0 finished,
    1 refused or aborted (the record is marked failed), 2 bad options, 130 interrupted
    (SIGTERM/SIGINT; the record is marked failed and completed items are kept).
    """
    from labeling.store import open_store
    from opinions.prelabel.consent import privacy_text
    from opinions.prelabel.run_errors import PrelabelRunAborted, PrelabelServiceError
    from opinions.prelabel.service import run_prelabelling
    from trajectories.workspace import Workspace

    signal.signal(signal.SIGTERM, _interrupt)
    settings = settings_for(workspace)
    try:
        options = PrelabelOptions.from_params(params).with_defaults(settings)
    except PrelabelServiceError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    if not settings.database_url:
        settings.workspace.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.annotations_url())
    if run_id is not None:
        # The page created the run record; record this process so liveness can be checked.
        store.prelabels.update_run(run_id, pid=os.getpid())
    code = 0
    try:
        notice = privacy_text(options)
        if notice:
            click.echo(f"privacy: {notice}", err=True)
        try:
            outcome = run_prelabelling(Workspace.from_settings(settings), store, options,
                                       run_id=run_id)
        except PrelabelServiceError as e:
            click.echo(f"error: {e}", err=True)
            code = 1
        except PrelabelRunAborted as e:
            click.echo(f"error: {e} (kept {e.stats.labelled} new labels; run again to resume)",
                       err=True)
            code = 1
        except KeyboardInterrupt:
            click.echo("interrupted; completed items are kept", err=True)
            code = 130
        else:
            s = outcome.stats
            if run_id is None:
                click.echo(str(outcome.run_id))
            click.echo(f"run {outcome.run_id}: labelled {s.labelled}, cached {s.cached}, "
                       f"failed {s.failed}, calls {s.calls}, tokens "
                       f"{s.input_tokens + s.output_tokens}, estimated cost "
                       f"${s.estimated_cost_usd:.4f}", err=True)
            if _chooses_format(options):
                click.echo(_structured_output_line(outcome.structured_output,
                                                   outcome.structured_output_refused), err=True)
            for line in s.errors[:20]:
                click.echo(f"failed: {line}", err=True)
    finally:
        store.close()
    sys.exit(code)
