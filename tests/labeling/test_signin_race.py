"""The sign-in throttle under parallel attempts: 32 wrong passwords for one user at once, from
threads of one server and from several server processes, check at most the free allowance.

Counted, not timed: the lock after the free attempts is ten minutes here, so an attempt that
starts late still finds it, and the assertions are about how many passwords were checked.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from labeling.store import Store, open_store
from labeling.store.sessions import CHECK_HOLD_S, SignInRefusal, ThrottleRule

ATTEMPTS = 32
FREE = 5
RULE = ThrottleRule(free_attempts=FREE, base_s=600.0, max_s=900.0)
NAME = "victim"
PASSWORD = "correct horse battery"
CLIENT = "client:10.0.0.9"


def _attempt(store: Store, i: int) -> str:
    result = store.sessions.sign_in(NAME, f"wrong password {i}", CLIENT, RULE)
    return result.reason if isinstance(result, SignInRefusal) else "signed_in"


def _threads(store: Store, n: int, start: Any) -> list[str]:
    """`n` attempts in threads that all wait on `start` (a barrier) before trying."""
    out: list[str] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        start.wait()
        reason = _attempt(store, i)
        with lock:
            out.append(reason)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _server(url: str, n: int, start: Any, results: Any) -> None:
    """One server process: its own store (engine, pool, SQLite write lock) and `n` threads."""
    store = open_store(url)
    try:
        results.put(_threads(store, n, start))
    finally:
        store.close()


def _url(store: Store) -> str:
    return store.engine.url.render_as_string(hide_password=False)


def _check_counts(store: Store, outcomes: list[str]) -> None:
    counts = Counter(outcomes)
    assert len(outcomes) == ATTEMPTS
    # Exactly the free allowance was checked (each check a wrong password); every other
    # attempt was refused without a check, either while those ran or after the lock fell.
    assert counts["wrong"] == FREE, counts
    assert set(counts) <= {"wrong", "busy_checking", "locked"}, counts
    assert store.sessions.failures(f"user:{NAME}") == FREE
    assert store.sessions.failures(CLIENT) == FREE
    assert store.sessions.checks_in_flight(f"user:{NAME}") == 0
    assert store.sessions.locked_until([f"user:{NAME}"]) is not None


def test_parallel_wrong_passwords_in_one_server_check_at_most_the_free_limit(
    store: Store,
) -> None:
    store.users.add(NAME, "annotator", password=PASSWORD)
    start = threading.Barrier(ATTEMPTS)
    _check_counts(store, _threads(store, ATTEMPTS, start))


@pytest.mark.slow
def test_parallel_wrong_passwords_across_server_processes_check_at_most_the_free_limit(
    store: Store,
) -> None:
    store.users.add(NAME, "annotator", password=PASSWORD)
    ctx = multiprocessing.get_context("spawn")
    processes, per_process = 4, ATTEMPTS // 4
    start = ctx.Barrier(ATTEMPTS)
    results = ctx.Queue()
    workers = [ctx.Process(target=_server, args=(_url(store), per_process, start, results))
               for _ in range(processes)]
    for w in workers:
        w.start()
    outcomes = [reason for _ in workers for reason in results.get(timeout=300)]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    _check_counts(store, outcomes)


def test_admission_counts_checks_in_flight_and_settles_them(store: Store) -> None:
    now = datetime.now(UTC)
    keys = [f"user:{NAME}", CLIENT]
    rule = ThrottleRule(free_attempts=3, base_s=2, max_s=60)
    admitted = [store.sessions.admit(keys, rule, now=now) for _ in range(4)]
    # Three checks may run side by side (the free allowance); the fourth waits for them.
    assert [a.admitted for a in admitted] == [True, True, True, False]
    assert admitted[3].busy and admitted[3].locked_until is None
    assert store.sessions.checks_in_flight(CLIENT, now=now) == 3
    assert store.sessions.failures(CLIENT) == 0  # nothing failed yet
    for a in admitted[:2]:
        store.sessions.settle(a, "failure", rule, now=now)
    store.sessions.settle(admitted[2], "unchecked", rule, now=now)  # e.g. the server was busy
    assert store.sessions.failures(CLIENT) == 2 and store.sessions.checks_in_flight(CLIENT) == 0
    third = store.sessions.admit(keys, rule, now=now)
    assert third.admitted
    store.sessions.settle(third, "failure", rule, now=now)
    assert store.sessions.locked_until(keys, now=now) == now + timedelta(seconds=2)
    # While locked an attempt is refused and not counted.
    refused = store.sessions.admit(keys, rule, now=now)
    assert not refused.admitted and refused.locked_until == now + timedelta(seconds=2)
    assert store.sessions.failures(CLIENT) == 3
    # Beyond the allowance, one check at a time: the next waits for the one running.
    later = now + timedelta(seconds=3)
    one = store.sessions.admit(keys, rule, now=later)
    assert one.admitted and store.sessions.admit(keys, rule, now=later).busy
    # A success clears the name's count only; the client's count stays.
    store.sessions.settle(one, "success", rule, clear=[f"user:{NAME}"], now=later)
    assert store.sessions.failures(f"user:{NAME}") == 0
    assert store.sessions.failures(CLIENT) == 3
    assert store.sessions.locked_until([f"user:{NAME}"], now=later) is None


def test_a_check_whose_server_died_stops_holding_the_key(store: Store) -> None:
    now = datetime.now(UTC)
    keys = [f"user:{NAME}"]
    rule = ThrottleRule(free_attempts=1)
    assert store.sessions.admit(keys, rule, now=now).admitted  # never settled: a crash
    assert store.sessions.admit(keys, rule, now=now).busy
    after = now + timedelta(seconds=CHECK_HOLD_S + 1)
    assert store.sessions.checks_in_flight(keys[0], now=after) == 0
    assert store.sessions.admit(keys, rule, now=after).admitted


def test_sign_in_reports_each_outcome(store: Store) -> None:
    store.users.add(NAME, "annotator", password=PASSWORD)
    rule = ThrottleRule(free_attempts=2, base_s=600, max_s=900)
    signed = store.sessions.sign_in(NAME, PASSWORD, CLIENT, rule)
    assert not isinstance(signed, SignInRefusal) and signed.name == NAME
    assert store.sessions.failures(CLIENT) == 0  # a success is not a failure of the client
    assert store.sessions.sign_in("nobody", PASSWORD, CLIENT, rule) == SignInRefusal("wrong")
    for client in ("client:other", "client:more"):  # the name is the key: any case, any client
        assert store.sessions.sign_in(NAME.upper(), "nope", client, rule) == SignInRefusal("wrong")
    refused = store.sessions.sign_in(NAME, PASSWORD, "client:third", rule)
    assert isinstance(refused, SignInRefusal) and refused.reason == "locked"
    assert refused.until is not None


@pytest.mark.parametrize("outcome", ["failure", "success", "unchecked"])
def test_settling_a_refused_attempt_changes_nothing(store: Store, outcome: str) -> None:
    now = datetime.now(UTC)
    rule = ThrottleRule(free_attempts=1, base_s=600, max_s=900)
    store.sessions.record_failure([CLIENT], rule, now=now)
    refused = store.sessions.admit([CLIENT], rule, now=now)
    assert not refused.admitted
    store.sessions.settle(refused, outcome, rule, clear=[CLIENT], now=now)  # type: ignore[arg-type]
    assert store.sessions.failures(CLIENT) == 1
