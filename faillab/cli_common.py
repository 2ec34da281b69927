"""Pieces every ``faillab`` sub-command shares: options, output and the one-line error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from faillab.settings import Settings
from trajectories.workspace import DEFAULT_SUCCESS_SOURCE, SUCCESS_SOURCES, Workspace

F = TypeVar("F", bound=Callable[..., Any])


def workspace_option(func: F) -> F:
    return click.option(
        "--workspace", "workspace", type=click.Path(path_type=Path), default=None,
        help="Workspace directory (default: $FAILLAB_WORKSPACE, else ./workspace).",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON value.")(func)


def success_source_option(func: F) -> F:
    return click.option(
        "--success-source", "success_source", type=click.Choice(SUCCESS_SOURCES),
        default=DEFAULT_SUCCESS_SOURCE, show_default=True,
        help="Success from the producer's recorded verdict (falling back to exact match) or "
             "from exact match (falling back to the recorded verdict; EHR-Complex's scoring).",
    )(func)


def settings_for(workspace: Path | None) -> Settings:
    return Settings.from_env(workspace=workspace)


def open_workspace(workspace: Path | None) -> Workspace:
    return Workspace(settings_for(workspace).workspace)


def emit(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


class UserError(click.ClickException):
    """One clear line on stderr, exit status 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)
