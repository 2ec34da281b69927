"""The pre-label cache (PrelabelStore protocol) and run progress."""

from __future__ import annotations

import pytest

from labeling.store import Store, StoreError
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord, PrelabelStore


def test_prelabel_upsert_and_failure_records(store: Store) -> None:
    cache: PrelabelStore = store.prelabels  # the store's pre-label part satisfies the protocol
    key = PrelabelKey("t1", "v1", "p1", "gemini-x")
    assert cache.get(key) is None
    cache.save(PrelabelRecord(key=key, result=None, error="timeout", attempts=3))
    failed = cache.get(key)
    assert failed is not None and not failed.ok and failed.error == "timeout"
    result = LabelResult("bad_join", 0.8, 3, "step 3: ...", "gemini", "2", "other")
    ok = PrelabelRecord(key=key, result=result, input_tokens=100, output_tokens=20)
    cache.save(ok)
    assert cache.get(key) == ok
    other_prompt = PrelabelKey("t1", "v1", "p2", "gemini-x")
    assert cache.get(other_prompt) is None
    assert store.prelabels.count() == 1


def test_run_progress(store: Store) -> None:
    run_id = store.prelabels.start_run("gemini", "gemini-x", total=10, pid=1234)
    run = store.prelabels.update_run(
        run_id, done=4, labelled=3, cached=1, calls=3, tokens=900, estimated_cost=0.02
    )
    assert (run.status, run.done, run.pid, run.finished_at) == ("running", 4, 1234, None)
    run = store.prelabels.update_run(run_id, status="done", done=10)
    assert run.finished_at is not None
    assert store.prelabels.get_run(run_id) == run
    second = store.prelabels.start_run("heuristic", "heuristic")
    assert [r.id for r in store.prelabels.latest_runs()] == [second, run_id]
    with pytest.raises(StoreError):
        store.prelabels.update_run(run_id, colour="blue")
    with pytest.raises(StoreError):
        store.prelabels.update_run(run_id, status="paused")
    assert store.prelabels.get_run(999) is None


def test_get_prelabels_reads_one_configuration_in_bulk(store: Store) -> None:
    for tid in ("a", "b"):
        store.prelabels.save(PrelabelRecord(PrelabelKey(tid, "v1", "p1", "m1"),
                                            LabelResult("x", 0.5, 1, "r", "h", "1")))
    store.prelabels.save(PrelabelRecord(PrelabelKey("c", "v1", "p1", "m1"), None, error="boom"))
    store.prelabels.save(PrelabelRecord(PrelabelKey("a", "v1", "p1", "other-model"),
                                        LabelResult("y", 0.9, None, "r", "h", "1")))
    found = store.prelabels.get_many("v1", "p1", "m1")
    assert set(found) == {"a", "b", "c"}
    assert found["a"] == store.prelabels.get(PrelabelKey("a", "v1", "p1", "m1"))
    assert found["c"].result is None and found["c"].error == "boom"


def test_save_many_upserts_in_bulk_and_keeps_labels_over_failures(store: Store) -> None:
    def key(i: int) -> PrelabelKey:
        return PrelabelKey(f"t{i}", "v1", "p1", "gemini-x")

    result = LabelResult("bad_join", 0.8, 3, "step 3", "gemini", "2")
    # More rows than one transaction chunk, so chunking is exercised on both backends.
    store.prelabels.save_many([PrelabelRecord(key(i), result) for i in range(2_500)])
    assert store.prelabels.count() == 2_500
    assert len(store.prelabels.get_many("v1", "p1", "gemini-x")) == 2_500
    store.prelabels.save(PrelabelRecord(key(5_000), None, error="timeout"))
    # A later batch whose answers failed: labelled items keep their label, failed ones are
    # updated, new ones are stored.
    failures = [PrelabelRecord(key(i), None, error="batch: no answer")
                for i in (0, 1, 5_000, 6_000)]
    store.prelabels.save_many(failures, keep_labels=True)
    assert store.prelabels.get(key(0)) == PrelabelRecord(key(0), result)
    assert store.prelabels.get(key(1)) == PrelabelRecord(key(1), result)
    assert (got := store.prelabels.get(key(5_000))) is not None and got.error == "batch: no answer"
    assert (new := store.prelabels.get(key(6_000))) is not None and not new.ok
    # A label replaces a failure even with keep_labels.
    store.prelabels.save_many([PrelabelRecord(key(6_000), result)], keep_labels=True)
    assert store.prelabels.get(key(6_000)) == PrelabelRecord(key(6_000), result)
    # Without keep_labels the newest record wins, as save() does.
    store.prelabels.save_many([PrelabelRecord(key(0), None, error="replaced")])
    assert (gone := store.prelabels.get(key(0))) is not None and gone.error == "replaced"
