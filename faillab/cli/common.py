"""Pieces every ``faillab`` sub-command shares: options, output and the one-line error."""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from faillab_core.settings import Settings, SettingsError
from faillab_core.textsafe import terminal_text

if TYPE_CHECKING:
    from trajectories.workspace import Workspace

# Nothing here imports the workspace or the store at module level: `faillab --help` loads this
# module, and those pull in DuckDB, pandas and SQLAlchemy. Each helper imports what it needs.

F = TypeVar("F", bound=Callable[..., Any])


def workspace_option(func: F) -> F:
    return click.option(
        "--workspace", "workspace", type=click.Path(path_type=Path), default=None,
        help="Workspace directory (default: $FAILLAB_WORKSPACE, else ./workspace).",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON value.")(func)


def success_source_option(func: F) -> F:
    # Runs when a sub-command module is imported, that is, only when that command is invoked.
    from trajectories.workspace import DEFAULT_SUCCESS_SOURCE, SUCCESS_SOURCES

    return click.option(
        "--success-source", "success_source", type=click.Choice(SUCCESS_SOURCES),
        default=DEFAULT_SUCCESS_SOURCE, show_default=True,
        help="Success from the producer's recorded verdict (falling back to exact match) or "
             "from exact match (falling back to the recorded verdict; EHR-Complex's scoring).",
    )(func)


def settings_for(workspace: Path | None) -> Settings:
    """The settings, with ``--workspace`` over $FAILLAB_WORKSPACE; a value a setting does not
    take is the command's one-line error."""
    try:
        return Settings.from_env(workspace=workspace)
    except SettingsError as err:
        raise UserError(str(err)) from None


def open_workspace(workspace: Path | None) -> Workspace:
    from trajectories.workspace import Workspace

    return Workspace.from_settings(settings_for(workspace))


def people_verdicts(workspace: Path | None) -> dict[str, bool | None]:
    """People's verdicts as the command line sees them (the operator: every person's, a
    lead's winning), for the one outcome rule (``trajectories.outcome``); none when this
    workspace has never had an annotation store (reading must not create one)."""
    settings = settings_for(workspace)
    if not settings.has_annotation_store():
        return {}  # before the store's modules load: a command without labels stays light
    from labeling.store import StoreError, open_store

    try:
        store = open_store(settings.annotations_url())
    except StoreError as err:
        raise UserError(f"cannot read people's verdicts: {err}") from None
    try:
        return store.verdicts.effective()
    finally:
        store.close()


def emit(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


class UserError(click.ClickException):
    """One clear line on stderr, exit status 1."""

    def show(self, file: Any = None) -> None:
        # Messages quote file contents (field names, values): one line, no escape sequences.
        click.echo(f"error: {terminal_text(self.message, keep_newlines=False)}", err=True)


def echo_text(text: str, *, nl: bool = True, err: bool = False) -> None:
    """Print human-readable text with terminal escapes and control characters removed.

    Run names, model names and notes come from imported files; printed raw they could move
    the cursor, retitle the window or hide lines. ``--json`` output needs no such care.
    """
    click.echo(terminal_text(text), nl=nl, err=err)


def _sqlite_path(url: str) -> Path | None:
    prefix = "sqlite:///"
    return Path(url[len(prefix):]).resolve() if url.startswith(prefix) else None


def _given(name: str) -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return True
    return ctx.get_parameter_source(name) not in (
        click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP, None)


def check_output(
    output: Path,
    settings: Settings,
    fmt: str,
    *,
    suffixes: dict[str, str] | None = None,
    fmt_param: str = "fmt",
    directory: bool = False,
    inside_workspace: bool = False,
) -> str:
    """Validate an ``--output`` path the same way for every command; return the format.

    * Never the annotation store, and (unless ``inside_workspace``) nothing inside the
      workspace folder: an export must not overwrite the data it was made from.
    * A missing parent folder is created; a parent that is a file is refused.
    * With ``suffixes`` the format follows the file's extension when ``--format`` was not
      given, and an extension naming another format than ``--format`` is refused.
    """
    target = output.expanduser().resolve()
    store = _sqlite_path(settings.annotations_url())
    if store is not None and (target == store or (target.name.startswith(store.name + "-")
                              and target.parent == store.parent)):
        raise UserError(f"{output} is the annotation store; choose another file")
    root = settings.workspace.expanduser().resolve()
    if not inside_workspace and (target == root or root in target.parents):
        raise UserError(f"{output} is inside the workspace {root}; write exports elsewhere")
    if directory:
        if target.exists() and not target.is_dir():
            raise UserError(f"{output} exists and is not a folder")
    elif target.is_dir():
        raise UserError(f"{output} is a folder; give a file name")
    if suffixes is not None and not directory:
        implied = suffixes.get(target.suffix.lower())
        if implied is not None and implied != fmt:
            if _given(fmt_param):
                raise UserError(f"{output} looks like {implied} but --format is {fmt}; "
                                "make them agree")
            fmt = implied
    parent = target if directory else target.parent
    for folder in (parent, *parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise UserError(f"cannot create {parent}: {folder} is a file")
            break
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create folder {parent}: {err.strerror or err}") from None
    return fmt


def write_output(output: Path, text: str) -> None:
    """Write a checked ``--output`` file; an OS error is one line, not a traceback."""
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as err:
        raise UserError(f"cannot write {output}: {err.strerror or err}") from None


# What the machine refuses (by OS error number, and by SQLite's primary result code for the
# files opened with sqlite3 directly, such as the LLM verdict cache), as the error line says it.
_OS_REFUSALS: dict[int, str] = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EIO: "a disk I/O error (is the disk full or failing?)",
}
_SQLITE_REFUSALS: dict[str, str] = {
    "SQLITE_FULL": "the disk is full",
    "SQLITE_IOERR": "a disk I/O error (is the disk full or failing?)",
    "SQLITE_READONLY": "the file or file system is read-only",
    "SQLITE_CANTOPEN": "a file cannot be opened (no permission, or a read-only file system)",
    "SQLITE_PERM": "permission denied",
}


def environment_refusal(err: BaseException) -> str | None:
    """One line for an error the machine caused (a full disk, a read-only file system, no
    permission) anywhere in ``err``'s chain, or None when it is something else."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _OS_REFUSALS:
            where = f"cannot write {current.filename}" if current.filename else "cannot write"
            return (f"{where}: {_OS_REFUSALS[current.errno]}; free some space or make it "
                    "writable, then run the command again")
        name = str(getattr(current, "sqlite_errorname", "") or "")
        cause = _SQLITE_REFUSALS.get("_".join(name.split("_")[:2]))
        if cause is not None:
            return (f"{cause} ({current}); free some space or make it writable, then run the "
                    "command again")
        orig = getattr(current, "orig", None)  # SQLAlchemy's wrapper of a driver error
        current = orig if isinstance(orig, BaseException) else (
            current.__cause__ or current.__context__)
    return None
