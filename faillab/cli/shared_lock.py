"""One writer at a time for a workspace whose parts live in an object store.

An import or a compaction publishes by replacing the object store's ``manifest.json``. The
workspace's own write lock is a file on the machine that runs the command, so it cannot stop a
second machine; two machines publishing at once would each write a manifest, and the later one
would leave the other's parts unlisted. Object stores offer no rename or lock that pyarrow's
client can use, but a multi-user deployment already has one PostgreSQL server (the label store):
a session-level advisory lock there, keyed by the trajectories URL, serialises the writers of that
URL across machines. The lock belongs to the database session, so a writer that dies releases it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from faillab_core.settings import Settings
from trajectories.objectstore import is_remote

#: Prefix of the text hashed into the advisory-lock key (one key per trajectories URL).
_KEY_PREFIX = "faillab-parts-writer:"


def lock_key(trajectories_url: str) -> int:
    """The advisory-lock key for one parts location: a signed 64-bit integer, as PostgreSQL's
    ``pg_advisory_lock(bigint)`` takes."""
    digest = hashlib.sha256((_KEY_PREFIX + trajectories_url.rstrip("/")).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def uses_shared_lock(settings: Settings) -> bool:
    """True when writers on other machines are excluded: remote parts and a PostgreSQL store."""
    return is_remote(settings.trajectories_url) and _is_postgres(settings.database_url)


def _is_postgres(url: str) -> bool:
    if not url:
        return False
    from sqlalchemy.engine import make_url

    return make_url(url).get_backend_name() == "postgresql"


@contextmanager
def parts_writer_lock(settings: Settings, say: Callable[[str], None]) -> Iterator[None]:
    """Hold the cross-machine writer lock for the parts location while the block runs.

    Local parts need nothing more than the workspace's file lock. Remote parts with a SQLite
    label store cannot be locked across machines: ``say`` warns once and the block runs (the
    deployment guide asks for one import host in that set-up)."""
    url = settings.trajectories_url
    if not is_remote(url):
        yield
        return
    if not _is_postgres(settings.database_url):
        say(f"warning: {url} is shared, but without a PostgreSQL label store "
            "(FAILLAB_DATABASE_URL) imports from other machines are not excluded; "
            "import from one machine at a time")
        yield
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    key = lock_key(url)
    engine = create_engine(settings.database_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            # Autocommit: a session lock must not sit inside a transaction held open for the
            # whole import (idle-in-transaction timeouts would end the session and the lock).
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
                say(f"waiting: another machine is importing into or compacting {url}")
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    finally:
        engine.dispose()
