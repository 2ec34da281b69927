"""One-time invitations: a person sets their own password from a link, instead of a lead
handing over a generated one.

The link carries a random token; only its SHA-256 is stored (a copy of the database invites
nobody), with an expiry. Using it is one conditional UPDATE (unused and unexpired, in the same
statement), so of two uses racing, on one server or several sharing PostgreSQL, exactly one
wins. A new invitation for a person replaces their earlier unused ones.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update

from labeling.store.base import Part
from labeling.store.errors import StoreError
from labeling.store.models import InvitationRow, UserRow, utcnow
from labeling.store.records import User
from labeling.store.sessions import token_hash


class InvitationError(StoreError):
    """The invitation is unknown, already used or expired: it sets no password."""


#: How long an invitation link works unless said otherwise.
DEFAULT_TTL = timedelta(days=7)


class Invitations(Part):
    """`store.invitations`: one-time links to set a password."""

    def create(self, name: str, ttl: timedelta = DEFAULT_TTL,
               now: datetime | None = None) -> str:
        """A new invitation for `name` (returned once; only its hash is stored). Earlier
        unused invitations of `name` stop working."""
        now = now or utcnow()
        token = secrets.token_urlsafe(32)
        with self._write() as s:
            user = self._user_row(s, name)
            s.execute(delete(InvitationRow).where(InvitationRow.user_id == user.id,
                                                  InvitationRow.used_at.is_(None)))
            s.add(InvitationRow(token_hash=token_hash(token), user_id=user.id,
                                created_at=now, expires_at=now + ttl))
        return token

    def name_for(self, token: str, now: datetime | None = None) -> str | None:
        """Whose invitation `token` is, while it is unused and unexpired (else None)."""
        if not token:
            return None
        now = now or utcnow()
        with self._read() as s:
            row = s.execute(
                select(UserRow.name)
                .join(InvitationRow, InvitationRow.user_id == UserRow.id)
                .where(InvitationRow.token_hash == token_hash(token),
                       InvitationRow.used_at.is_(None), InvitationRow.expires_at > now)
            ).first()
        return None if row is None else str(row[0])

    def redeem(self, token: str, password: str, now: datetime | None = None) -> User:
        """Use `token` once: its person's password becomes `password` (checked against the
        policy first: a refused password leaves the invitation usable), every session of theirs
        ends, and the invitation is spent. Raises InvitationError when it is unknown, used or
        expired, PasswordPolicyError when the password is refused."""
        from labeling.store.users import _hasher, check_password, user_record

        name = self.name_for(token, now)
        if name is None:
            raise InvitationError("this invitation link is unknown, already used or expired; "
                                  "ask a lead for a new one")
        check_password(password, name)
        # Hash outside the transaction: argon2 is deliberately slow and must not hold a lock.
        password_hash = _hasher.hash(password)
        now = now or utcnow()
        from labeling.store.models import AuthSessionRow

        with self._write() as s:
            spent = s.execute(
                update(InvitationRow)
                .where(InvitationRow.token_hash == token_hash(token),
                       InvitationRow.used_at.is_(None), InvitationRow.expires_at > now)
                .values(used_at=now)
            )
            if int(getattr(spent, "rowcount", 0) or 0) != 1:
                raise InvitationError("this invitation link was used a moment ago; ask a lead "
                                      "for a new one")
            user = self._user_row(s, name)
            user.password_hash = password_hash
            s.execute(delete(AuthSessionRow).where(AuthSessionRow.user_id == user.id))
            s.flush()
            return user_record(user)

    def pending(self, now: datetime | None = None) -> dict[str, datetime]:
        """Each person with a live invitation, and when it expires."""
        now = now or utcnow()
        with self._read() as s:
            rows = s.execute(
                select(UserRow.name, InvitationRow.expires_at)
                .join(InvitationRow, InvitationRow.user_id == UserRow.id)
                .where(InvitationRow.used_at.is_(None), InvitationRow.expires_at > now)
            ).all()
        return {str(name): expires for name, expires in rows}
