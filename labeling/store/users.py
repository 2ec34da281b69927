"""Users and passwords (argon2id via argon2-cffi)."""

from __future__ import annotations

import contextlib
import threading

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from faillab_core.errors import FaillabError
from labeling.store.base import Part
from labeling.store.errors import ConflictError, StoreError
from labeling.store.models import UserRow
from labeling.store.records import ROLES, User

_hasher = PasswordHasher()
# Verified against when the name is unknown or has no password, so a wrong name costs the same
# argon2 work as a wrong password (no user enumeration by timing).
_DUMMY_HASH = _hasher.hash("not a real password")
# Each argon2 check holds ~64 MiB; bound how many run at once in this process.
_hash_slots = threading.BoundedSemaphore(2)


#: NIST SP 800-63B (5.1.1.2): memorised secrets chosen by people are at least 8 characters.
MIN_PASSWORD_LENGTH = 8
#: Refused whatever their length: the commonest passwords of at least 8 characters in public
#: breach corpora, plus words of this workbench. A short list on purpose (NIST asks for a check
#: against known-bad values, not for composition rules); compared without regard to case.
COMMON_PASSWORDS = frozenset({
    "00000000", "11111111", "12121212", "123123123", "12341234", "12344321", "12345678",
    "123456789", "1234567890", "1234qwer", "1q2w3e4r", "1q2w3e4r5t", "1qaz2wsx", "87654321",
    "88888888", "987654321", "aa123456", "abc12345", "abcd1234", "abcdefgh", "admin123",
    "administrator", "annotator", "asdfasdf", "asdfghjk", "asdfghjkl", "baseball", "changeme",
    "charlie1", "computer", "correcthorsebatterystaple", "dragon12", "faillab1", "failurelab",
    "football", "iloveyou", "jennifer", "letmein1", "letmein123", "linkedin", "michelle",
    "mimiciv1", "monkey12", "password", "password!", "password1", "password12", "password123",
    "passw0rd", "princess", "q1w2e3r4", "qazwsxedc", "qwerty12", "qwerty123", "qwertyui",
    "qwertyuiop", "starwars", "sunshine", "superman", "trustno1", "welcome1", "welcome123",
    "whatever", "zaq12wsx",
})


class PasswordPolicyError(StoreError):
    """A password the policy refuses (too short, too common, or the user's own name)."""


def check_password(password: str, name: str | None = None) -> None:
    """Raise PasswordPolicyError unless `password` may be set (for `name`, when given).

    Length is counted in characters (code points), as NIST asks, and spaces count: a
    pass phrase is welcome. No composition rules (they make passwords worse, not better).
    """
    if len(password) < MIN_PASSWORD_LENGTH:
        raise PasswordPolicyError(
            f"the password is too short: at least {MIN_PASSWORD_LENGTH} characters, "
            f"{len(password)} given")
    folded = password.casefold()
    if folded in COMMON_PASSWORDS:
        raise PasswordPolicyError(
            "the password is one of the most common passwords; choose another")
    if len(set(folded)) == 1:
        raise PasswordPolicyError("the password is one character repeated; choose another")
    if name is not None and folded == name.strip().casefold():
        raise PasswordPolicyError("the password is the user's name; choose another")


class SignInBusyError(FaillabError):
    """Too many password checks are running at once; try again in a moment."""


def set_password_check_concurrency(n: int) -> None:
    """How many password checks may run at once in this process (setting signin_concurrency)."""
    global _hash_slots
    _hash_slots = threading.BoundedSemaphore(max(1, n))


def _verify(stored: str, password: str, wait_s: float = 30.0) -> bool:
    slots = _hash_slots
    if not slots.acquire(timeout=wait_s):
        raise SignInBusyError("the server is busy checking other sign-ins; try again")
    try:
        return bool(_hasher.verify(stored, password))
    except (VerificationError, InvalidHashError):
        return False
    finally:
        slots.release()


def user_record(row: UserRow) -> User:
    return User(
        id=row.id,
        name=row.name,
        role=row.role,
        created_at=row.created_at,
        has_password=row.password_hash is not None,
    )


def _check(name: str, role: str) -> str:
    name = name.strip()
    if not name:
        raise StoreError("a user name cannot be empty")
    if role not in ROLES:
        raise StoreError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    return name


class Users(Part):
    """`store.users`: people, their roles and passwords."""

    def add(self, name: str, role: str = "annotator", password: str | None = None) -> User:
        """A new user; a password, when given, must pass `check_password`."""
        name = _check(name, role)
        if password is not None:
            check_password(password, name)
        # Hash outside the transaction: argon2 is deliberately slow and must not hold a lock.
        password_hash = _hasher.hash(password) if password is not None else None
        try:
            with self._write() as s:
                row = UserRow(name=name, role=role, password_hash=password_hash)
                s.add(row)
                s.flush()
                return user_record(row)
        except IntegrityError:
            raise ConflictError(f"user {name!r} already exists") from None

    def ensure(self, name: str, role: str = "annotator") -> User:
        """The user, created with `role` if missing (an existing user's role is left alone)."""
        name = _check(name, role)
        existing = self.get(name)
        if existing is not None:
            return existing
        with self._write() as s:  # an upsert: a concurrent creation is found, not an error
            self._upsert_users(s, [name], role)
            return user_record(self._user_row(s, name))

    def get(self, name: str) -> User | None:
        with self._read() as s:
            row = s.scalars(select(UserRow).where(UserRow.name == name.strip())).first()
            return user_record(row) if row is not None else None

    def all(self) -> list[User]:
        with self._read() as s:
            return [user_record(r) for r in s.scalars(select(UserRow).order_by(UserRow.name))]

    def set_password(self, name: str, password: str) -> None:
        """Set (or replace) `name`'s password; it must pass `check_password`. Sessions are
        left alone: the caller decides which to end (`store.sessions`)."""
        check_password(password, name)
        self.require(name)  # an unknown name says so before the slow hash
        self._store_hash(name, password)

    def _store_hash(self, name: str, password: str) -> None:
        password_hash = _hasher.hash(password)
        with self._write() as s:
            self._user_row(s, name).password_hash = password_hash

    def set_role(self, name: str, role: str) -> None:
        _check(name, role)
        with self._write() as s:
            self._user_row(s, name).role = role

    def verify_password(self, name: str, password: str) -> User | None:
        """The user if the password matches; None for a wrong password or unknown user."""
        with self._read() as s:
            row = s.scalars(select(UserRow).where(UserRow.name == name.strip())).first()
            if row is None or row.password_hash is None:
                _verify(_DUMMY_HASH, password)  # same cost as a real check, result ignored
                return None
            stored = row.password_hash
            user = user_record(row)
        if not _verify(stored, password):
            return None
        if _hasher.check_needs_rehash(stored):
            # Parameters were raised since this hash was made; upgrade it while we know the
            # password. Not critical, so a failure here must not fail the login.
            # No policy check: this is the password the user already has.
            with contextlib.suppress(StoreError):
                self._store_hash(name, password)
        return user

    def require(self, name: str) -> None:
        """Raise NotFoundError unless `name` is a user."""
        with self._read() as s:
            self._user_row(s, name)
