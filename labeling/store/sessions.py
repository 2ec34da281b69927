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
from typing import Literal

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

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


#: An admitted check whose attempt was never settled (its server died) stops counting as in
#: flight after this long. Far above the longest real check: at most 30 s waiting for a free
#: password-check slot, then one argon2 hash.
CHECK_HOLD_S = 120.0

Outcome = Literal["failure", "success", "unchecked"]


def _checking(key: str) -> str:
    """The row counting the checks in flight for `key` (same table: no schema change)."""
    return f"{key}#checking"


@dataclass(frozen=True)
class Admission:
    """The throttle's decision on one attempt: admitted (its check counted in flight), locked
    until a time, or busy (enough checks for these keys are already running)."""

    keys: tuple[str, ...]
    admitted: bool = False
    locked_until: datetime | None = None
    busy: bool = False


@dataclass(frozen=True)
class SignInRefusal:
    """Why a sign-in did not succeed: ``wrong`` (unknown name or wrong password), ``locked``
    (too many failures; `until` says how long), ``busy_checking`` (other attempts for this
    name or client are being checked) or ``server_busy`` (no password-check slot free)."""

    reason: Literal["wrong", "locked", "busy_checking", "server_busy"]
    until: datetime | None = None


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
        from labeling.store.users import user_record

        with self._read() as s:
            row = s.execute(
                select(AuthSessionRow.expires_at, UserRow)
                .join(UserRow, UserRow.id == AuthSessionRow.user_id)
                .where(AuthSessionRow.token_hash == token_hash(token))
            ).first()
            if row is None or row[0] <= now:
                return None
            return user_record(row[1])

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

    def revoke_others(self, name: str, keep_token: str) -> int:
        """End every session of `name` but the one of `keep_token` (after a password change
        in the app: whoever else holds a session of this user is signed out)."""
        with self._write() as s:
            user = self._user_row(s, name)
            result = s.execute(delete(AuthSessionRow).where(
                AuthSessionRow.user_id == user.id,
                AuthSessionRow.token_hash != token_hash(keep_token)))
            return int(getattr(result, "rowcount", 0) or 0)

    def change_password(self, token: str, current: str, new: str, client: str,
                        rule: ThrottleRule) -> SignInRefusal | None:
        """The signed-in user of `token` changes their password: None when done, else why not.

        The current password is checked behind the same throttle as a sign-in (a session left
        open on a shared screen must not become a way to guess it), the new one against the
        policy (`users.check_password`, raised as PasswordPolicyError before any check). Every
        other session of the user ends; this one stays signed in.
        """
        from labeling.store.users import Users, check_password

        user = self.user(token)
        if user is None:
            return SignInRefusal("wrong")
        check_password(new, user.name)
        checked = self.sign_in(user.name, current, client, rule)
        if isinstance(checked, SignInRefusal):
            return checked
        Users(self._core).set_password(user.name, new)
        self.revoke_others(user.name, token)
        return None

    def purge_expired(self, now: datetime | None = None) -> None:
        now = now or utcnow()
        with self._write() as s:
            s.execute(delete(AuthSessionRow).where(AuthSessionRow.expires_at <= now))

    # -- throttling --------------------------------------------------------------------------
    def admit(self, keys: list[str], rule: ThrottleRule, now: datetime | None = None) -> Admission:
        """Decide whether one sign-in attempt over `keys` may check its password, and if so
        count it as a check in flight, in one transaction.

        Deciding and counting must be one step: when they were two, 32 parallel wrong
        passwords all read "not locked" before any failure was written and all were checked.
        Here the rows of `keys` are locked first (SELECT ... FOR UPDATE on PostgreSQL; on
        SQLite the write transaction is BEGIN IMMEDIATE, which holds the whole database), so
        parallel attempts, in one process or on several replicas, are decided one after the
        other, each seeing the checks the others started.

        An attempt is let through when no key is locked and, for every key, the failures so far
        plus the checks in flight stay below `rule.free_attempts`, or no check is in flight:
        within the free allowance checks may run side by side, beyond it one at a time, each
        after the lock of the one before has run out. Refused attempts are not counted. Every
        admitted attempt must be settled (`settle`), whatever its outcome.
        """
        now = now or utcnow()
        wanted = sorted(set(keys))
        with self._write() as s:
            rows = self._locked_rows(s, wanted, now)
            locks = [until for k in wanted
                     if (until := rows[k].locked_until) is not None and until > now]
            if locks:
                return Admission(keys=tuple(wanted), locked_until=max(locks))
            for key in wanted:
                failures, checking = rows[key].failures, self._in_flight(rows[_checking(key)], now)
                if checking and failures + checking >= rule.free_attempts:
                    return Admission(keys=tuple(wanted), busy=True)
            for key in wanted:
                hold = rows[_checking(key)]
                hold.failures = self._in_flight(hold, now) + 1
                hold.updated_at = now
        return Admission(keys=tuple(wanted), admitted=True)

    def settle(self, admission: Admission, outcome: Outcome, rule: ThrottleRule, *,
               clear: list[str] | None = None, now: datetime | None = None) -> None:
        """Record how an admitted attempt ended: ``failure`` (a wrong password: one failure
        more for each key, and the lock that follows from the count), ``success`` (the keys in
        `clear` start again from zero; the others are left as they were) or ``unchecked`` (the
        password was never checked, e.g. the server was busy: nothing is counted)."""
        if not admission.admitted:
            return
        now = now or utcnow()
        cleared = set(clear or ())
        with self._write() as s:
            rows = self._locked_rows(s, list(admission.keys), now)
            for key in admission.keys:
                hold = rows[_checking(key)]
                hold.failures = max(0, hold.failures - 1)
                row = rows[key]
                if outcome == "failure":
                    row.failures += 1
                    row.updated_at = now
                    wait = rule.lock_seconds(row.failures)
                    if wait:
                        until = now + timedelta(seconds=wait)
                        # Checks that ran side by side settle in any order: the lock only grows.
                        if row.locked_until is None or row.locked_until < until:
                            row.locked_until = until
                elif outcome == "success" and key in cleared:
                    row.failures = 0
                    row.locked_until = None
                    row.updated_at = now

    @staticmethod
    def _in_flight(hold: SignInThrottleRow, now: datetime) -> int:
        """Checks in flight on a hold row; none once the last admission is older than
        `CHECK_HOLD_S` (its server died mid-check: a check never takes that long)."""
        if hold.updated_at + timedelta(seconds=CHECK_HOLD_S) <= now:
            return 0
        return hold.failures

    def _locked_rows(self, s: Session, keys: list[str],
                     now: datetime) -> dict[str, SignInThrottleRow]:
        """The counter and hold rows of `keys`, created when missing, locked for this
        transaction. Always in key order, so two transactions never wait on each other."""
        every = sorted({*keys, *(_checking(k) for k in keys)})
        insert_ = pg_insert if self.dialect == "postgresql" else sqlite_insert
        # INSERT ... ON CONFLICT DO NOTHING: a row another replica created a moment ago is
        # simply found (on PostgreSQL the insert waits for that replica's commit).
        s.execute(
            insert_(SignInThrottleRow)
            .values([{"key": k, "failures": 0, "locked_until": None, "updated_at": now}
                     for k in every])
            .on_conflict_do_nothing(index_elements=["key"])
        )
        found = s.scalars(
            select(SignInThrottleRow)
            .where(SignInThrottleRow.key.in_(every))
            .order_by(SignInThrottleRow.key)
            .with_for_update()
            .execution_options(populate_existing=True)
        ).all()
        return {row.key: row for row in found}

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
        """Count one failure for `keys` without a check in flight (imports, tests); sign-in
        itself goes through `admit` and `settle`."""
        now = now or utcnow()
        with self._write() as s:
            rows = self._locked_rows(s, sorted(set(keys)), now)
            for key in sorted(set(keys)):
                row = rows[key]
                row.failures += 1
                row.updated_at = now
                wait = rule.lock_seconds(row.failures)
                row.locked_until = now + timedelta(seconds=wait) if wait else None

    def failures(self, key: str) -> int:
        with self._read() as s:
            row = s.get(SignInThrottleRow, key)
            return row.failures if row is not None else 0

    def checks_in_flight(self, key: str, now: datetime | None = None) -> int:
        """How many admitted attempts over `key` have not been settled yet."""
        with self._read() as s:
            row = s.get(SignInThrottleRow, _checking(key))
            return self._in_flight(row, now or utcnow()) if row is not None else 0

    def clear_failures(self, keys: list[str]) -> None:
        with self._write() as s:
            s.execute(delete(SignInThrottleRow).where(SignInThrottleRow.key.in_(keys)))

    # -- the whole sign-in check ---------------------------------------------------------------
    def sign_in(self, name: str, password: str, client: str, rule: ThrottleRule,
                now: datetime | None = None) -> User | SignInRefusal:
        """Check a password behind the throttle: the user, or why not.

        The throttle keys are the name (case-folded) and `client`. The attempt is admitted and
        counted before the password is checked (`admit`), so parallel attempts cannot all pass
        the gate; a successful sign-in clears the name's count.
        """
        from labeling.store.users import SignInBusyError, Users

        user_key = f"user:{name.strip().lower()}"
        admission = self.admit([user_key, client], rule, now)
        if admission.locked_until is not None:
            return SignInRefusal("locked", admission.locked_until)
        if not admission.admitted:
            return SignInRefusal("busy_checking")
        outcome: Outcome = "unchecked"
        user: User | None = None
        try:
            user = Users(self._core).verify_password(name, password)
            outcome = "failure" if user is None else "success"
        except SignInBusyError:
            pass
        finally:
            # Settled whatever happened, even on an error, so a check is never left in flight.
            self.settle(admission, outcome, rule, clear=[user_key], now=now)
        if outcome == "unchecked":
            return SignInRefusal("server_busy")
        return user if user is not None else SignInRefusal("wrong")
