"""Sign-in sessions (opaque random tokens, stored hashed, with expiry and revocation) and
sign-in throttling (failures counted per user and per client, exponential back-off).

Both live in the store, not in a server's memory, so they hold across reloads, restarts and
several server replicas sharing one PostgreSQL database.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from labeling.store.base import Part
from labeling.store.models import AuthSessionRow, SignInThrottleRow, UserRow, utcnow
from labeling.store.records import User


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ThrottleRule:
    """After `free_attempts` failures for a key, each further failure locks that key for
    `base_s * 2 ** (failures - free_attempts)` seconds, at most `max_s`."""

    free_attempts: int = 5
    base_s: float = 2.0
    max_s: float = 900.0

    def lock_seconds(self, failures: int) -> float:
        if failures < self.free_attempts:
            return 0.0
        return float(min(self.max_s, self.base_s * 2 ** (failures - self.free_attempts)))


class Sessions(Part):
    """`store.sessions`: sign-in sessions and sign-in throttling."""

    # -- sessions ----------------------------------------------------------------------------
    def create(self, name: str, ttl: timedelta, now: datetime | None = None) -> str:
        """A new random session token for `name` (returned once; only its hash is stored)."""
        now = now or utcnow()
        token = secrets.token_urlsafe(32)
        with self._write() as s:
            user = self._user_row(s, name)
            s.add(AuthSessionRow(token_hash=token_hash(token), user_id=user.id,
                                 created_at=now, expires_at=now + ttl))
        return token

    def user(self, token: str, now: datetime | None = None) -> User | None:
        """The user of a live session token; None for unknown, expired or revoked tokens."""
        if not token:
            return None
        now = now or utcnow()
        from labeling.store.users import _record

        with self._read() as s:
            row = s.execute(
                select(AuthSessionRow.expires_at, UserRow)
                .join(UserRow, UserRow.id == AuthSessionRow.user_id)
                .where(AuthSessionRow.token_hash == token_hash(token))
            ).first()
            if row is None or row[0] <= now:
                return None
            return _record(row[1])

    def end(self, token: str) -> None:
        """Sign-out: the token stops working at once."""
        with self._write() as s:
            s.execute(delete(AuthSessionRow).where(AuthSessionRow.token_hash == token_hash(token)))

    def revoke_all(self, name: str) -> int:
        """End every session of `name`; returns how many were ended."""
        with self._write() as s:
            user = self._user_row(s, name)
            result = s.execute(delete(AuthSessionRow).where(AuthSessionRow.user_id == user.id))
            return int(getattr(result, "rowcount", 0) or 0)

    def purge_expired(self, now: datetime | None = None) -> None:
        now = now or utcnow()
        with self._write() as s:
            s.execute(delete(AuthSessionRow).where(AuthSessionRow.expires_at <= now))

    # -- throttling --------------------------------------------------------------------------
    def locked_until(self, keys: list[str], now: datetime | None = None) -> datetime | None:
        """The latest lock still in force over `keys`, or None when sign-in may be tried."""
        now = now or utcnow()
        with self._read() as s:
            locks = [
                r for r in s.scalars(
                    select(SignInThrottleRow.locked_until).where(SignInThrottleRow.key.in_(keys))
                ) if r is not None and r > now
            ]
        return max(locks) if locks else None

    def record_failure(self, keys: list[str], rule: ThrottleRule,
                       now: datetime | None = None) -> None:
        try:
            self._count_failure(keys, rule, now or utcnow())
        except IntegrityError:  # another replica created the same row first: count again
            self._count_failure(keys, rule, now or utcnow())

    def _count_failure(self, keys: list[str], rule: ThrottleRule, now: datetime) -> None:
        with self._write() as s:
            for key in keys:
                row = s.get(SignInThrottleRow, key, with_for_update=True)
                if row is None:
                    row = SignInThrottleRow(key=key, failures=0, updated_at=now)
                    s.add(row)
                row.failures += 1
                row.updated_at = now
                wait = rule.lock_seconds(row.failures)
                row.locked_until = now + timedelta(seconds=wait) if wait else None

    def failures(self, key: str) -> int:
        with self._read() as s:
            row = s.get(SignInThrottleRow, key)
            return row.failures if row is not None else 0

    def clear_failures(self, keys: list[str]) -> None:
        with self._write() as s:
            s.execute(delete(SignInThrottleRow).where(SignInThrottleRow.key.in_(keys)))
