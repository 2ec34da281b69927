"""Many writers at once: threads, processes, and two leads racing on one decision."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from labeling.store import Adjudication, ConflictError, Store, open_store
from tests.support import save_test_taxonomy

THREADS = 20
PROCESSES = 4
PER_WRITER = 200


def _write_labels(store: Store, annotator: str, n: int) -> None:
    for i in range(n):
        # Each write a distinct label (its step), so a re-label is never the same label again.
        store.labels.add(f"traj-{i % 50}", "wrong_table", annotator=annotator,
                         taxonomy_version="v1", first_error_step=i)


def _process_worker(url: str, annotator: str, n: int) -> None:
    # Runs in a spawned interpreter: opens the store itself (which races on migrations too).
    store = open_store(url)
    try:
        save_test_taxonomy(store)
        store.users.ensure(annotator)
        _write_labels(store, annotator, n)
    finally:
        store.close()


def test_twenty_threads_lose_no_label(store: Store) -> None:
    names = [f"worker{i}" for i in range(THREADS)]
    for name in names:
        store.users.add(name)
    barrier = threading.Barrier(THREADS)

    def work(name: str) -> None:
        barrier.wait()  # start together to maximise contention
        _write_labels(store, name, PER_WRITER)

    with ThreadPoolExecutor(THREADS) as pool:
        for future in [pool.submit(work, n) for n in names]:
            future.result()
    frame = store.labels.frame()
    assert len(frame) == THREADS * PER_WRITER
    assert frame.groupby("annotator").size().to_dict() == dict.fromkeys(names, PER_WRITER)
    assert len(store.history.entries(entity="label")) == THREADS * PER_WRITER


@pytest.mark.slow
def test_processes_lose_no_label(db_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_process_worker, args=(db_url, f"proc{i}", PER_WRITER))
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0, f"writer process failed with exit code {p.exitcode}"
    store = open_store(db_url)
    try:
        frame = store.labels.frame()
        assert len(frame) == PROCESSES * PER_WRITER
        assert set(frame.groupby("annotator").size()) == {PER_WRITER}
    finally:
        store.close()


CATEGORY_BY = {"lea": "wrong_table", "max": "bad_join"}  # who decided shows in the row


def _race(store: Store, leads: list[str], expected_version: int | None) -> list[object]:
    barrier = threading.Barrier(len(leads))

    def decide(lead: str) -> object:
        barrier.wait()
        try:
            return store.adjudications.decide(
                "t-race",
                CATEGORY_BY[lead],
                "looked at step 3",
                lead,
                expected_version=expected_version,
                taxonomy_version="v",
            )
        except ConflictError as exc:
            return exc

    with ThreadPoolExecutor(len(leads)) as pool:
        return list(pool.map(decide, leads))


@pytest.mark.parametrize("repeat", range(3))
def test_two_leads_racing_on_an_update(team: Store, repeat: int) -> None:
    team.users.add("max", "lead")
    first = team.adjudications.decide("t-race", "a", "initial", "lea", expected_version=None,
                                      taxonomy_version="v")
    outcomes = _race(team, ["lea", "max"], first.version)
    wins = [o for o in outcomes if isinstance(o, Adjudication)]
    losses = [o for o in outcomes if isinstance(o, ConflictError)]
    assert len(wins) == 1 and len(losses) == 1
    winner = wins[0].decided_by
    assert f"changed by {winner}" in str(losses[0]) and "reload" in str(losses[0])
    stored = team.adjudications.get("t-race")
    assert stored is not None
    assert stored.version == first.version + 1 and stored.category == CATEGORY_BY[winner]
    entries = team.history.entries("adjudication", "t-race")
    assert [h.action for h in entries] == ["create", "update"]


def test_two_leads_racing_on_the_first_decision(team: Store) -> None:
    team.users.add("max", "lead")
    outcomes = _race(team, ["lea", "max"], None)
    wins = [o for o in outcomes if isinstance(o, Adjudication)]
    losses = [o for o in outcomes if isinstance(o, ConflictError)]
    assert len(wins) == 1 and len(losses) == 1
    assert f"changed by {wins[0].decided_by}" in str(losses[0])
    assert len(team.history.entries("adjudication", "t-race")) == 1


def test_reads_open_no_transaction_on_postgresql_and_writes_still_do(store: Store) -> None:
    """At READ COMMITTED every statement takes its own snapshot, so a read transaction only
    added a BEGIN and a ROLLBACK round trip: PostgreSQL reads run in autocommit. SQLite
    reads keep theirs (one snapshot per read). A write on the same pool after such reads is
    still one transaction: an error inside it leaves nothing."""
    from sqlalchemy import select

    from labeling.store.models import UserRow, utcnow

    core = store._core
    with core._read() as session:
        session.execute(select(1))
        driver = session.connection().connection.dbapi_connection
        assert driver is not None
        if store.dialect == "postgresql":
            from psycopg.pq import TransactionStatus

            assert driver.info.transaction_status == TransactionStatus.IDLE
        else:
            assert driver.in_transaction
    for _ in range(5):
        store.users.all()
    with pytest.raises(RuntimeError), core._write() as session:
        session.add(UserRow(name="ghost", role="annotator", created_at=utcnow()))
        session.flush()
        raise RuntimeError("a failure after the insert")
    assert "ghost" not in {user.name for user in store.users.all()}
