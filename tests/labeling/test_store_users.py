"""Users, roles and password hashing."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from labeling.store import ConflictError, Store, StoreError


def test_password_is_hashed_and_verified(store: Store) -> None:
    store.users.add("ana", "annotator", password="correct horse")
    assert store.users.verify_password("ana", "correct horse") is not None
    assert store.users.verify_password("ana", "wrong") is None
    assert store.users.verify_password("nobody", "correct horse") is None
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT password_hash FROM users WHERE name = 'ana'")).scalar()
    assert stored is not None and stored.startswith("$argon2") and "correct horse" not in stored


def test_user_without_password_cannot_log_in(store: Store) -> None:
    store.users.add("ben")
    assert store.users.verify_password("ben", "") is None
    store.users.set_password("ben", "s3cret phrase")
    user = store.users.verify_password("ben", "s3cret phrase")
    assert user is not None and user.has_password


def test_roles_names_and_duplicates(store: Store) -> None:
    store.users.add("lea", "lead")
    with pytest.raises(ConflictError):
        store.users.add("lea", "annotator")
    with pytest.raises(StoreError):
        store.users.add("x", "superuser")
    with pytest.raises(StoreError):
        store.users.add("  ")
    assert store.users.ensure("lea").role == "lead"  # existing role is kept
    assert store.users.ensure("new").role == "annotator"
    assert [u.name for u in store.users.all()] == ["lea", "new"]
    assert store.users.get("missing") is None
