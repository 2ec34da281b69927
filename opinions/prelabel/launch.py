"""Background runs: start the hidden ``faillab prelabel-worker`` command and watch it.

The app launches the worker so that a long run neither blocks the server nor dies with a page
session; progress goes to the run's ``prelabel_runs`` record (which the page polls), messages
to ``run_log_path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from opinions.prelabel.options import PrelabelOptions

if TYPE_CHECKING:
    from labeling.store import PrelabelRun, Store

__all__ = [
    "WORKER_COMMAND",
    "launch_worker",
    "mark_dead_run",
    "run_log_path",
    "worker_command",
]

# The hidden CLI command the worker runs as (registered in faillab/cli/commands.py).
WORKER_COMMAND = "prelabel-worker"


def run_log_path(workspace_root: Path, run_id: int) -> Path:
    """Where a background run's output goes (the run record has no room for messages)."""
    return workspace_root / "logs" / f"prelabel-run-{run_id}.log"


def worker_command(options: PrelabelOptions, *, run_id: int, workspace_root: Path) -> list[str]:
    # The CLI module of the running interpreter: the worker runs exactly the installed code
    # the caller runs, with no search-path tricks.
    return [
        sys.executable,
        "-m",
        "faillab.cli",
        WORKER_COMMAND,
        "--run-id",
        str(run_id),
        "--workspace",
        str(workspace_root),
        *options.to_argv(),
    ]


def launch_worker(
    options: PrelabelOptions,
    *,
    run_id: int,
    workspace_root: Path,
    database_url: str = "",
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the worker for ``run_id`` and return at once.

    The worker gets its own session (``start_new_session``) so it survives a page rerun or a
    browser tab closing, and can be stopped as a group. Its output goes to ``run_log_path``."""
    child_env = dict(os.environ if env is None else env)
    child_env["FAILLAB_WORKSPACE"] = str(workspace_root)
    if database_url:
        # Through the environment, not argv: a URL may carry a password and argv is public.
        child_env["FAILLAB_DATABASE_URL"] = database_url
    log = run_log_path(workspace_root, run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            worker_command(options, run_id=run_id, workspace_root=workspace_root),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
        )


def mark_dead_run(store: Store, run: PrelabelRun, returncode: int | None) -> PrelabelRun:
    """A worker that exited while its record still says running (killed with SIGKILL, out of
    memory) cannot update it any more: record the run as failed on its behalf."""
    if run.status != "running" or returncode is None:
        return run
    return store.prelabels.update_run(run.id, status="failed")
