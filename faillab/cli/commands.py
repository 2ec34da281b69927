"""The ``faillab`` command: a thin face over the domain packages.

With ``--json`` a command prints exactly one JSON value on stdout; messages go to stderr.
Errors the user can fix print one line and exit with status 1 (never a traceback).

Sub-commands live in their own modules and are imported only when invoked (``LazyGroup``), so
``faillab --help`` loads click and nothing of pandas, DuckDB or SQLAlchemy.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

from faillab.cli.common import UserError, environment_refusal, settings_for, workspace_option
from faillab_core.settings import AuthMode


class LazyGroup(click.Group):
    """A group whose sub-commands are ``module:attribute`` paths, imported on first use.

    Each entry also carries the command's one-line help, so listing the commands (``--help``)
    imports none of them; a test checks that these lines equal the commands' own.
    """

    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]] | None = None,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy: dict[str, tuple[str, str]] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def invoke(self, ctx: click.Context) -> object:
        # Whichever command meets it: an annotation database that does not answer is one line
        # naming it (the store raises StoreUnavailableError), never a driver traceback.
        try:
            return super().invoke(ctx)
        except Exception as err:
            # Imported only now: the store's modules are not loaded by `faillab --help`.
            from labeling.store.errors import StoreUnavailableError
            from trajectories.objectstore import ObjectStoreError

            if isinstance(err, StoreUnavailableError):
                raise UserError(f"{err}; nothing was changed, try again once it is back") \
                    from None
            if isinstance(err, ObjectStoreError):
                # The object store holding the parts did not answer (or refused): one line
                # naming the bucket and prefix, as for the annotation store.
                raise UserError(str(err)) from None
            if not isinstance(err, click.ClickException | click.exceptions.Exit |
                              click.exceptions.Abort):
                # A full disk, a read-only file system or no permission, met outside the
                # store (the workspace folder, the verdict cache, an export): one line too.
                said = environment_refusal(err)
                if said is not None:
                    raise UserError(said) from None
            raise

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            return load_command(self.lazy[cmd_name][0])
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: list[tuple[str, str]] = []
        # Hidden lazy commands (no help line) do not widen the name column.
        names = [n for n in self.list_commands(ctx) if n not in self.lazy or self.lazy[n][1]]
        # As click does: the help column starts after the longest name.
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        for name in names:
            if name in self.lazy:
                if not self.lazy[name][1]:
                    continue  # a hidden command (no help line) is not listed
                # A stand-in command shortens the line exactly as click shortens a real one.
                stand_in = click.Command(name, help=self.lazy[name][1])
                rows.append((name, stand_in.get_short_help_str(limit)))
                continue
            cmd = super().get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def load_command(path: str) -> click.Command:
    module_name, _, attr = path.partition(":")
    command = getattr(importlib.import_module(module_name), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{path} is not a click command")
    return command


#: name -> (module:attribute, one-line help shown by ``faillab --help``; "" for a hidden command).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "audit": ("faillab.cli.audit:audit",
        "Human validity audit of tasks no selected run solved."),
    "clusters": ("faillab.cli.clusters:clusters",
        "Group the workspace's failed trajectories into look-alike clusters (question, final "
        "SQL, error text, divergence), largest first; outliers are marked for one-by-one "
        "confirmation."),
    "demo": ("faillab.cli.workspace:demo",
        "Build the synthetic demo workspace: an EHR database, tasks and simulated agents."),
    "evaluate": ("faillab.cli.clusters:evaluate",
        "Agreement of the heuristic, the first-divergence finder and the classifier "
        "(cross-validated, grouped by task) with a hand-labelled set: accuracy, Cohen's kappa, "
        "first-step exact and within one step, share of real (non-fallback) suggestions."),
    "evidence": ("faillab.cli.evidence:evidence",
        "First diverging step, diverging part, evidence rows and suggested category for "
        "each failure in PATH."),
    "import": ("faillab.cli.workspace:import_cmd",
        "Import trajectory files: native JSONL, tau-bench/OpenAI chat logs, Inspect AI "
        "logs (.eval, .json), LM Studio conversations, results tables (CSV/TSV of final "
        "answers), agent SDK traces (OpenTelemetry GenAI, OpenInference, Langfuse, Anthropic "
        "messages, OpenAI Agents, smolagents, LangSmith), or any JSON mapped with --map."),
    "labels": ("faillab.cli.labels:labels",
        "Export and import failure labels."),
    "list": ("faillab.cli.workspace:list_cmd",
        "List trajectories: 'ok', 'FAIL' or '----' (unscored) with id, run, model and "
        "task."),
    "prelabel": ("faillab.cli.prelabel:prelabel",
        "Pre-label the workspace's failed trajectories (cached, resumable)."),
    "prelabel-worker": ("faillab.cli.prelabel:prelabel_worker", ""),
    "sandbox": ("faillab.cli.sandbox:sandbox",
        "The EHR database that agent and reference SQL are re-run against."),
    "score": ("faillab.cli.workspace:score_cmd",
        "Re-score every trajectory by exact match and the judge with the current rules."),
    "show": ("faillab.cli.show:show",
        "Print one trajectory: question, every step with its observation, final answer vs "
        "ground truth, outcome and reference SQL."),
    "stats": ("faillab.cli.stats:stats",
        "Print one analysis TABLE (or 'all'): success, passk, turns, turn_budget, "
        "taxonomy, taxonomy_corrected, taxonomy_turns, provenance, robustness, reliability, "
        "labeller."),
    "summary": ("faillab.cli.workspace:summary",
        "Counts of trajectories, tasks, runs, failures, unscored trajectories (no ground "
        "truth and no recorded outcome) and outcome disagreements."),
    "team": ("faillab.cli.team:team",
        "Set up a labelling team in one step from PEOPLE, a list (a file, or - for stdin) "
        "with one person a line: 'name' or 'name,role' (annotator, lead, admin)."),
    "users": ("faillab.cli.users:users",
        "Create people, list them, change their role."),
    "verdicts": ("faillab.cli.verdicts:verdicts",
        "Did the agent fail? The judge's verdicts, people's verdicts and their agreement."),
    "workspace": ("faillab.cli.workspace:workspace",
        "Upkeep of the workspace's trajectory parts."),
}


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """EHR Failure Lab: see, label and audit LLM-agent trajectories on clinical databases."""


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
    # The light theme the quick charts' fixed colours are drawn for: started elsewhere, the
    # app followed the browser's dark preference under white tables.
    ("theme.base", "light"),
    ("theme.primaryColor", "#1f5f8b"),
    # Speed of every script run (measured at 50,000 trajectories, docs/benchmarks.md): the
    # forced full garbage collection after each run cost 0.12 CPU s of a 0.19 s near-empty run,
    # holding the interpreter while the run's last messages wait to be sent (Python's own
    # collector still runs); "magic" rewrote each page script's syntax tree again whenever the
    # last tab had closed (the script cache is then cleared), and no page uses it.
    ("runner.postScriptGC", "false"),
    ("runner.magicEnabled", "false"),
)
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    return host in LOOPBACK or host.startswith("127.")


def serve_command(main_py: Path, host: str, port: int, headless: bool) -> list[str]:
    # Streamlit's command line, through the app's wrapper that closes the endpoints the
    # workbench must not serve (``faillab.app.serve``: /_stcore/metrics before sign-in).
    cmd = [sys.executable, "-m", "faillab.app.serve", "run", str(main_py),
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
    from faillab import app as app_package

    settings = settings_for(workspace)
    host = host or settings.host
    open_to_anyone = settings.auth == AuthMode.NONE and not is_loopback(host)
    if open_to_anyone and not allow_unauthenticated_network:
        raise UserError(
            f"refusing to listen on {host} with auth none (anyone on the network could use it); "
            "set FAILLAB_AUTH=password or oidc, or pass --allow-unauthenticated-network")
    env = {**os.environ, "FAILLAB_WORKSPACE": str(settings.workspace.resolve())}
    main_py = Path(app_package.__file__).with_name("main.py")
    cmd = serve_command(main_py, host, port, headless)
    # Become the server instead of starting a child: a signal to `faillab serve` (Ctrl-C, a
    # supervisor's SIGTERM) reaches Streamlit itself and never leaves an orphaned server behind.
    os.execve(cmd[0], cmd, env)


def run() -> None:
    """Entry point: domain errors the user can fix become one line on stderr and status 1."""
    try:
        main(standalone_mode=True)
    except Exception as err:
        # Every error a user can act on derives from FaillabError (faillab_core.errors), so any
        # such error that no command turned into its own message still prints as one line.
        from faillab_core.errors import FaillabError

        if not isinstance(err, FaillabError):
            raise
        click.echo(f"error: {err}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    run()
