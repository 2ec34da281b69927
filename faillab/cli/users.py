"""``faillab users``: the people who label, and their roles (annotator, lead, admin)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from faillab.cli.common import UserError, emit, json_option, settings_for, workspace_option
from labeling.store import Store, StoreError, StoreUnavailableError, open_store
from labeling.store.records import ROLES
from labeling.store.users import check_password


def open_annotations(workspace: Path | None) -> Store:
    """The annotation store for this workspace ($FAILLAB_DATABASE_URL, else its SQLite file)."""
    settings = settings_for(workspace)
    if not settings.database_url:
        settings.workspace.mkdir(parents=True, exist_ok=True)
    try:
        return open_store(settings.annotations_url())
    except StoreUnavailableError:
        raise  # callers may keep work for later (import's journal); else the CLI says it
    except StoreError as err:
        raise UserError(str(err)) from None


def _read_password(name: str) -> str:
    """The new password for `name`, refused with one line when the policy forbids it."""
    if sys.stdin.isatty():
        password = str(click.prompt(f"Password for {name}", hide_input=True,
                                    confirmation_prompt=True, err=True))
    else:
        # Piped: the first line is the password (so `printf 'pw\n' | faillab users add` works);
        # only the line ending is stripped, spaces inside or around a password are kept.
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise UserError("the password is empty (use --no-password for a user without one)")
    try:
        check_password(password, name)  # before the store is opened: nothing is half done
    except StoreError as err:
        raise UserError(str(err)) from None
    return password


@click.group()
def users() -> None:
    """Create people, list them, change their role."""


@users.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), default="annotator", show_default=True)
@click.option("--no-password", is_flag=True,
              help="No password (for auth mode none, or single sign-on users).")
@workspace_option
@json_option
def add(name: str, role: str, no_password: bool, workspace: Path | None, as_json: bool) -> None:
    """Add NAME; the password is read from stdin when piped, else prompted (hidden).

    A password has at least 8 characters and is not one of the commonest
    passwords nor the user's name.
    """
    password = None if no_password else _read_password(name)
    store = open_annotations(workspace)
    try:
        user = store.users.add(name, role, password)
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        store.close()
    if as_json:
        emit({"name": user.name, "role": user.role, "has_password": user.has_password})
    else:
        click.echo(f"added {user.name} ({user.role})")


@users.command("list")
@workspace_option
@json_option
def list_users(workspace: Path | None, as_json: bool) -> None:
    """Every user with role and whether a password is set."""
    store = open_annotations(workspace)
    try:
        people = store.users.all()
    finally:
        store.close()
    if as_json:
        emit([{"name": u.name, "role": u.role, "has_password": u.has_password,
               "created_at": u.created_at.isoformat()} for u in people])
        return
    for u in people:
        click.echo(f"{u.name}\t{u.role}" + ("" if u.has_password else "\t(no password)"))


@users.command("role")
@click.argument("name")
@click.argument("role", type=click.Choice(ROLES))
@workspace_option
def set_role(name: str, role: str, workspace: Path | None) -> None:
    """Change NAME's role to ROLE."""
    store = open_annotations(workspace)
    try:
        store.users.set_role(name, role)
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        store.close()
    click.echo(f"{name} is now {role}")


@users.command("revoke")
@click.argument("name")
@workspace_option
def revoke(name: str, workspace: Path | None) -> None:
    """Sign NAME out everywhere: end every browser session they have."""
    store = open_annotations(workspace)
    try:
        ended = store.sessions.revoke_all(name)
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        store.close()
    click.echo(f"ended {ended} session(s) of {name}")


@users.command("passwd")
@click.argument("name")
@click.option("--keep-sessions", is_flag=True,
              help="Leave NAME's browser sessions signed in (default: end them all).")
@workspace_option
def passwd(name: str, keep_sessions: bool, workspace: Path | None) -> None:
    """Set a new password for NAME (read from stdin when piped, else prompted, hidden).

    The same rules as for `users add` apply. Every browser session of NAME ends, so whoever
    knew the old password is signed out too, unless --keep-sessions is given.
    """
    store = open_annotations(workspace)
    try:
        store.users.require(name)  # an unknown name is refused before asking for a password
        password = _read_password(name)
        store.users.set_password(name, password)
        ended = 0 if keep_sessions else store.sessions.revoke_all(name)
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        store.close()
    click.echo(f"changed the password of {name}"
               + ("" if keep_sessions else f"; ended {ended} session(s)"))
