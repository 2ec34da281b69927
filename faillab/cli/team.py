"""``faillab team``: a labelling team in one step.

People come from a list (a file, or ``-`` for stdin): one person a line, ``name`` or
``name,role`` (a ``name,role`` header line is allowed; ``#`` starts a comment). Each new person
is added with a generated password that is printed once, here and never again (only its hash
is stored), or with ``--invite`` a one-time invitation link instead, where the person sets their
own password (the link's token is stored hashed, expires, and works once); people already in the
store keep their password and get the listed role (``--invite`` sends a new link to those who
have none yet). The
workspace's failures are then assigned to the annotators, a stratified share to two of them
(the overlap agreement is measured on), and the routing in effect is said.
"""

from __future__ import annotations

import secrets
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from faillab.cli.common import UserError, emit, json_option, settings_for, workspace_option
from labeling.store.records import ROLES

#: Characters of a generated password: 16 from a 64-letter alphabet is 96 bits, beyond guessing.
PASSWORD_BYTES = 12


@dataclass(frozen=True)
class Person:
    name: str
    role: str


def parse_people(text: str) -> list[Person]:
    """The people of a list (see the module docstring); the first error names its line."""
    people: dict[str, Person] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, role = (part.strip() for part in line.partition(","))
        role = (role or "annotator").lower()
        if number == 1 and (name.lower(), role) == ("name", "role"):
            continue  # a header line
        if role not in ROLES:
            raise UserError(f"line {number}: unknown role {role!r} for {name!r} (choose from "
                            f"{', '.join(ROLES)})")
        if name in people:
            raise UserError(f"line {number}: {name!r} is listed twice")
        people[name] = Person(name, role)
    if not people:
        raise UserError("the list names nobody: one person a line, 'name' or 'name,role'")
    return list(people.values())


def _read_list(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as err:
        raise UserError(f"cannot read {source}: {err.strerror or err}") from None


@click.command("team")
@click.argument("people", metavar="PEOPLE")
@click.option("--overlap", default=2, show_default=True, type=click.IntRange(1, 10),
              help="Annotators on each item of the doubly-annotated share.")
@click.option("--double-share", default=0.2, show_default=True, type=click.FloatRange(0, 1),
              help="Share of the failures (stratified by intent x scope) given to --overlap "
                   "annotators; the rest go to one each.")
@click.option("--limit", default=None, type=click.IntRange(1),
              help="Assign only the first N failures (a pilot round).")
@click.option("--seed", default=0, show_default=True, help="Seed of the assignment draw.")
@click.option("--no-passwords", is_flag=True,
              help="Add people without passwords (local use, FAILLAB_AUTH=none, or single "
                   "sign-on). Default: a password when the server asks for one.")
@click.option("--invite", is_flag=True,
              help="Instead of printing passwords, print a one-time invitation link for each "
                   "person without a password, where they set their own (password sign-in).")
@click.option("--url", "base_url", default="http://localhost:8501", show_default=True,
              help="The server's address as people reach it, for the invitation links.")
@click.option("--invite-days", default=7, show_default=True, type=click.IntRange(1, 90),
              help="Days an invitation link works.")
@workspace_option
@json_option
def team(people: str, overlap: int, double_share: float, limit: int | None, seed: int,
         no_passwords: bool, invite: bool, base_url: str, invite_days: int,
         workspace: Path | None, as_json: bool) -> None:
    """Set up a labelling team in one step from PEOPLE, a list (a file, or - for stdin) with
    one person a line: 'name' or 'name,role' (annotator, lead, admin).

    New people get a generated password, printed once (keep it: only its hash is stored), or
    with --invite a one-time link (valid --invite-days) where they set their own; people
    already there keep theirs and get the listed role. The workspace's failures are
    assigned to the annotators, a stratified share to --overlap of them; the routing in
    effect is printed. Run it again with more names to add people (their work is assigned
    from the failures nobody has yet).
    """
    from faillab.cli.users import open_annotations
    from faillab_core.settings import AuthMode
    from labeling.queue import create_assignments
    from labeling.store import StoreError
    from trajectories.workspace import Workspace

    listed = parse_people(_read_list(people))
    settings = settings_for(workspace)
    with_passwords = not no_passwords and settings.auth != AuthMode.NONE
    if invite and settings.auth != AuthMode.PASSWORD:
        raise UserError("--invite is for password sign-in (FAILLAB_AUTH=password): links set a "
                        f"password, and this workspace signs in with {settings.auth}")
    if invite and no_passwords:
        raise UserError("--invite and --no-passwords contradict each other: choose one")
    annotators = [p.name for p in listed if p.role == "annotator"]
    if overlap > max(len(annotators), 1):
        raise UserError(f"--overlap {overlap} needs at least {overlap} annotators; the list "
                        f"has {len(annotators)}")
    ws = Workspace.from_settings(settings)
    store = open_annotations(workspace)
    rows: list[dict[str, Any]] = []
    try:
        for person in listed:
            existing = store.users.get(person.name)
            if existing is not None:
                if existing.role != person.role:
                    store.users.set_role(person.name, person.role)
                row: dict[str, Any] = {"name": person.name, "role": person.role,
                                       "password": None, "status": "kept", "invite": None}
                if invite and not existing.has_password:
                    row["invite"] = _link(base_url, store.invitations.create(
                        person.name, timedelta(days=invite_days)))
                rows.append(row)
                continue
            password = (secrets.token_urlsafe(PASSWORD_BYTES)
                        if with_passwords and not invite else None)
            store.users.add(person.name, person.role, password)
            link = (_link(base_url, store.invitations.create(person.name,
                                                             timedelta(days=invite_days)))
                    if invite else None)
            rows.append({"name": person.name, "role": person.role, "password": password,
                         "status": "added", "invite": link})
        assigned = 0
        if annotators and ws.exists():
            # Items already in someone's queue stay there; a re-run assigns the rest.
            assigned = create_assignments(store, ws, annotators,
                                          overlap=min(overlap, len(annotators)),
                                          double_share=double_share if len(annotators) > 1
                                          else 0.0, seed=seed, limit=limit)
        per_person = {name: 0 for name in annotators}
        for _, name, _ in store.queues.assignments():
            if name in per_person:
                per_person[name] += 1
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        store.close()
    for row in rows:
        row["assigned"] = per_person.get(row["name"], 0)
    routing = {"prelabel_threshold": settings.prelabel_threshold,
               "spot_check_share": settings.spot_check_share,
               "routing_target": settings.routing_target,
               "routing_min_checked": settings.routing_min_checked}
    if as_json:
        emit({"people": rows, "new_assignments": assigned, "routing": routing,
              "auth": str(settings.auth),
              "invite_days": invite_days if invite else None})
        return
    _print(rows, assigned, routing, with_passwords, ws.exists(), invite_days if invite else None)


def _link(base_url: str, token: str) -> str:
    """The invitation link: the server's address with the token as ``?invite=``."""
    return f"{base_url.rstrip('/')}/?invite={token}"


def _print(rows: list[dict[str, Any]], assigned: int, routing: dict[str, Any],
           with_passwords: bool, has_workspace: bool, invite_days: int | None) -> None:
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        secret = r["invite"] or r["password"] or (
            "(password kept)" if r["status"] == "kept" else "(no password)")
        click.echo(f"{r['name']:<{width}}  {r['role']:<9}  {r['assigned']:>5} items  {secret}")
    if any(r["invite"] for r in rows):
        click.echo(f"Each link above works once, for {invite_days} days: send it to its person, "
                   "who sets their own password there (a new run of --invite replaces an "
                   "unused link).", err=True)
    if with_passwords and any(r["password"] for r in rows):
        click.echo("The passwords above are shown once: hand each to its person now "
                   "('faillab users passwd NAME' sets a new one).", err=True)
    if not has_workspace:
        click.echo("No trajectories yet: nothing assigned. Import, then run this again.",
                   err=True)
    else:
        click.echo(f"{assigned} new assignments.", err=True)
    click.echo(
        f"Routing: pre-labels under {routing['prelabel_threshold']:g} confidence go to people "
        f"first; a labeller's items are left to it only once people have checked "
        f"{routing['routing_min_checked']} of them per category and it agrees with them "
        f"{routing['routing_target']:.0%} of the time, with {routing['spot_check_share']:.0%} "
        "still spot-checked (FAILLAB_PRELABEL_THRESHOLD, FAILLAB_ROUTING_MIN_CHECKED, "
        "FAILLAB_ROUTING_TARGET, FAILLAB_SPOT_CHECK_SHARE; docs/settings.md).", err=True)


__all__ = ["parse_people", "team"]
