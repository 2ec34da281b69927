"""Users, roles and password hashing."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from labeling.store import ConflictError, Store, StoreError


def test_password_is_hashed_and_verified(store: Store) -> None:
    store.add_user("ana", "annotator", password="correct horse")
    assert store.verify_password("ana", "correct horse") is not None
    assert store.verify_password("ana", "wrong") is None
    assert store.verify_password("nobody", "correct horse") is None
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT password_hash FROM users WHERE name = 'ana'")).scalar()
    assert stored is not None and stored.startswith("$argon2") and "correct horse" not in stored


def test_user_without_password_cannot_log_in(store: Store) -> None:
    store.add_user("ben")
    assert store.verify_password("ben", "") is None
    store.set_password("ben", "s3cret")
    user = store.verify_password("ben", "s3cret")
    assert user is not None and user.has_password


def test_roles_names_and_duplicates(store: Store) -> None:
    store.add_user("lea", "lead")
    with pytest.raises(ConflictError):
        store.add_user("lea", "annotator")
    with pytest.raises(StoreError):
        store.add_user("x", "superuser")
    with pytest.raises(StoreError):
        store.add_user("  ")
    assert store.ensure_user("lea").role == "lead"  # existing role is kept
    assert store.ensure_user("new").role == "annotator"
    assert [u.name for u in store.list_users()] == ["lea", "new"]
    assert store.get_user("missing") is None
