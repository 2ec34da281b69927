"""One-time invitation links (store.invitations), on SQLite and PostgreSQL: the token is kept
hashed, works once, expires, a refused password leaves it usable, a new one replaces the old,
and of two uses racing exactly one sets the password."""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta

import pytest
from sqlalchemy import text

from labeling.store import Store
from labeling.store.invitations import InvitationError
from labeling.store.models import utcnow
from labeling.store.users import PasswordPolicyError


def test_an_invitation_sets_the_password_once(store: Store) -> None:
    store.users.add("ana", "annotator")
    token = store.invitations.create("ana")
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT token_hash FROM invitations")).scalars().all()
    assert stored == [hashlib.sha256(token.encode()).hexdigest()]  # never the token itself
    assert store.invitations.name_for(token) == "ana"
    assert list(store.invitations.pending()) == ["ana"]
    session = store.sessions.create("ana", timedelta(hours=1))
    user = store.invitations.redeem(token, "a long pass phrase")
    assert user.name == "ana" and user.has_password
    assert store.users.verify_password("ana", "a long pass phrase") is not None
    assert store.sessions.user(session) is None  # sessions from before end
    assert store.invitations.name_for(token) is None and store.invitations.pending() == {}
    with pytest.raises(InvitationError, match="unknown, already used or expired"):
        store.invitations.redeem(token, "another pass phrase")
    assert store.users.verify_password("ana", "another pass phrase") is None


def test_a_refused_password_leaves_the_invitation_usable(store: Store) -> None:
    store.users.add("ben")
    token = store.invitations.create("ben")
    with pytest.raises(PasswordPolicyError):
        store.invitations.redeem(token, "short")
    with pytest.raises(PasswordPolicyError):
        store.invitations.redeem(token, "ben")
    assert store.invitations.redeem(token, "ben's own pass phrase").name == "ben"


def test_invitations_expire_and_a_new_one_replaces_the_old(store: Store) -> None:
    store.users.add("cal")
    old = store.invitations.create("cal")
    new = store.invitations.create("cal")
    assert store.invitations.name_for(old) is None and store.invitations.name_for(new) == "cal"
    with pytest.raises(InvitationError):
        store.invitations.redeem(old, "a long pass phrase")
    later = utcnow() + timedelta(days=8)
    assert store.invitations.name_for(new, now=later) is None
    with pytest.raises(InvitationError):
        store.invitations.redeem(new, "a long pass phrase", now=later)
    short = store.invitations.create("cal", ttl=timedelta(minutes=5))
    assert store.invitations.name_for(short, now=utcnow() + timedelta(minutes=6)) is None
    assert store.invitations.name_for("") is None
    assert store.invitations.name_for("not-a-token") is None


def test_two_uses_racing_set_one_password(store: Store) -> None:
    store.users.add("dee")
    token = store.invitations.create("dee")
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def use(password: str) -> None:
        start.wait()
        try:
            store.invitations.redeem(token, password)
            outcomes.append(password)
        except InvitationError:
            outcomes.append("refused")

    threads = [threading.Thread(target=use, args=(p,))
               for p in ("first pass phrase", "second pass phrase")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [o for o in outcomes if o != "refused"]
    assert len(won) == 1 and outcomes.count("refused") == 1
    assert store.users.verify_password("dee", won[0]) is not None
