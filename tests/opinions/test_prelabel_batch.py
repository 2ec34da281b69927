"""Pre-labelling through Gemini's Batch API: the real google-genai SDK against the local fake
server's batch endpoints. Submit, poll, resume after a restart, collect into the same cache as
the interactive runner; API failures lose nothing."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from faillab_core.settings import Settings
from labeling.store import Store, open_store
from llm.errors import ConsentRequiredError
from opinions.prelabel.batch import (
    BatchError,
    BatchReport,
    advance_batch,
    load_state,
    state_path,
)
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.routing import prelabel_confidences
from opinions.prelabel.run_errors import PrelabelServiceError
from opinions.prelabel.service import run_prelabelling
from taxonomy import default_taxonomy
from tests.fake_gemini import Behaviour, FakeGemini

# The same copied demo workspace, label store and fake server (batch jobs finish on the second
# poll) as the interactive service tests.
from tests.opinions import test_prelabel_service as _service_tests
from trajectories.workspace import Workspace

ws = _service_tests.ws
store = _service_tests.store
fake = _service_tests.fake

GEMINI = PrelabelOptions(labeller="gemini", model="gemini-2.5-flash", vertex=False,
                         allow_external=True)


def failure_ids(ws: Workspace) -> list[str]:
    return [r["id"] for r in ws.list(needing_a_person=True)]


def labelled(store: Store, ws: Workspace, options: PrelabelOptions = GEMINI) -> dict[str, str]:
    found = prelabel_confidences(store, failure_ids(ws), options, default_taxonomy())
    return {tid: rec.result.category for tid, rec in found.items()
            if rec is not None and rec.result is not None}


def step(ws: Workspace, store: Store, options: PrelabelOptions = GEMINI,
         **kw: object) -> BatchReport:
    kw.setdefault("sleep", lambda s: None)
    return advance_batch(ws, store, options, **kw)  # type: ignore[arg-type]


def test_submit_then_collect_fills_the_same_cache(ws: Workspace, store: Store,
                                                  fake: FakeGemini) -> None:
    n = len(failure_ids(ws))
    plans: list[BatchReport] = []
    first = step(ws, store, on_plan=plans.append)
    # The estimate was shown before anything was submitted.
    assert len(plans) == 1 and plans[0].to_submit == n and plans[0].estimated_cost_usd > 0
    assert first.submitted_jobs == 1 and first.running_jobs == 1 and first.labelled == 0
    assert fake.batch_calls[0] == "create" and fake.request_count == 0
    assert load_state(state_path(ws.root)) is not None

    second = step(ws, store)
    assert (second.collected_jobs, second.labelled, second.failed) == (1, n, 0)
    assert second.input_tokens > 0 and second.cost_usd > 0
    assert not state_path(ws.root).exists()
    assert set(labelled(store, ws)) == set(failure_ids(ws))
    # The interactive runner reads the very same cache: nothing left to send.
    again = run_prelabelling(ws, store, GEMINI)
    assert again.stats.cached == n and again.stats.calls == 0 and fake.request_count == 0
    # And the next batch step has nothing to submit.
    assert step(ws, store).submitted_jobs == 0 and fake.batch_calls.count("create") == 1


def test_restart_resumes_without_duplicate_or_lost_labels(ws: Workspace, store: Store,
                                                         fake: FakeGemini) -> None:
    n = len(failure_ids(ws))
    # Small jobs, so the batch is several jobs; one poll says running, then done.
    first = step(ws, store, max_job_bytes=60_000)
    jobs = first.submitted_jobs
    assert jobs > 1
    # The process goes away: all that survives is the workspace (state file) and the store.
    store.close()
    state = load_state(state_path(ws.root))
    assert state is not None and len(state.jobs) == jobs
    assert sum(len(j.keys) for j in state.jobs) == n

    reopened = open_store(ws.default_annotations_url)
    try:
        report = step(ws, reopened, wait=True)
        assert report.collected_jobs == jobs and report.labelled == n
        assert set(labelled(reopened, ws)) == set(failure_ids(ws))
    finally:
        reopened.close()
    assert fake.batch_calls.count("create") == jobs  # nothing was submitted twice
    sent = [r.trajectory_id for r in fake.batch_items]
    assert len(sent) == len(set(sent)) == n


def test_create_failure_is_retried_then_reported_and_loses_nothing(
    ws: Workspace, store: Store, fake: FakeGemini
) -> None:
    fake.push_batch("create_500")
    report = step(ws, store)  # one transient failure: asked again
    assert report.submitted_jobs == 1 and fake.batch_calls.count("create") == 2
    step(ws, store)

    # A service that keeps failing: a clear error, the state file untouched, run again later.
    ws2_ids = failure_ids(ws)
    other = replace(GEMINI, model="gemini-2.5-flash-lite")
    fake.push_batch("create_500", "create_500", "create_500")
    with pytest.raises(BatchError, match="run the same command again"):
        step(ws, store, other)
    assert not state_path(ws.root).exists()
    assert labelled(store, ws, other) == {}
    report = step(ws, store, other, wait=True)
    assert report.labelled == len(ws2_ids)


def test_failed_job_and_bad_items_are_recorded_and_resent(ws: Workspace, store: Store,
                                                          fake: FakeGemini) -> None:
    ids = failure_ids(ws)
    bad = ids[0]
    fake.script_for(bad, Behaviour("malformed"))
    step(ws, store)
    report = step(ws, store)
    assert report.failed == 1 and bad in report.errors[0]
    assert bad not in labelled(store, ws) and len(labelled(store, ws)) == len(ids) - 1

    # The failure is sent again by the next submission, alone; this time the job fails.
    fake.push_batch("job_failed")
    assert step(ws, store).to_submit == 1
    failed = step(ws, store)
    assert failed.failed == 1 and "FAILED" in failed.errors[0]
    step(ws, store)
    assert step(ws, store).labelled == 1
    assert set(labelled(store, ws)) == set(ids)


def test_consent_is_required_after_the_estimate(ws: Workspace, store: Store,
                                                fake: FakeGemini) -> None:
    plans: list[BatchReport] = []
    with pytest.raises(ConsentRequiredError):
        step(ws, store, replace(GEMINI, allow_external=False), on_plan=plans.append, env={})
    assert plans and plans[0].estimated_cost_usd > 0
    assert fake.batch_calls == [] and not state_path(ws.root).exists()
    with pytest.raises(PrelabelServiceError, match="Vertex"):
        step(ws, store, replace(GEMINI, vertex=True))
    with pytest.raises(PrelabelServiceError, match="gemini"):
        step(ws, store, PrelabelOptions(labeller="heuristic"))



def test_polling_failures_keep_the_batch_for_the_next_run(ws: Workspace, store: Store,
                                                          fake: FakeGemini) -> None:
    n = len(failure_ids(ws))
    fake.push_batch("get_500")  # the poll right after submitting fails once: asked again
    first = step(ws, store)
    assert first.submitted_jobs == 1 and fake.batch_calls.count("get") == 2
    before = load_state(state_path(ws.root))
    fake.push_batch("get_500", "get_500", "get_500")
    with pytest.raises(BatchError, match="polling batches/"):
        step(ws, store)
    # Nothing forgotten: the same job is still recorded, and the next run collects it.
    assert load_state(state_path(ws.root)) == before
    assert step(ws, store).labelled == n
    assert fake.batch_calls.count("create") == 1


def test_job_whose_creation_answer_was_lost_is_found_not_resubmitted(
    ws: Workspace, store: Store, fake: FakeGemini
) -> None:
    n = len(failure_ids(ws))
    fake.push_batch("create_lost")  # created on the service, but the answer never arrives
    with pytest.raises(BatchError):
        step(ws, store)
    state = load_state(state_path(ws.root))
    assert state is not None and [j.name for j in state.jobs] == [""]
    # The next step finds the job by its display name and collects it: one job, no re-send.
    step(ws, store)
    report = step(ws, store)
    assert report.labelled == n and "list" in fake.batch_calls
    assert fake.batch_calls.count("create") == 1 and len(fake.batch_items) == n
    assert set(labelled(store, ws)) == set(failure_ids(ws))


# -- deadlines ----------------------------------------------------------------------------------


def test_waiting_ends_at_the_step_deadline_and_loses_nothing(ws: Workspace, store: Store,
                                                             fake: FakeGemini) -> None:
    fake.batch_polls = 10**6  # the job never finishes while we wait
    assert step(ws, store).submitted_jobs == 1
    started = time.monotonic()
    with pytest.raises(BatchError, match=r"deadline of 1s \(FAILLAB_BATCH_DEADLINE\); 1 job"):
        step(ws, store, wait=True, poll_every_s=0.05, deadline_s=1.0, sleep=time.sleep)
    assert time.monotonic() - started < 10
    state = load_state(state_path(ws.root))
    assert state is not None and len(state.open_jobs) == 1  # still there, to collect later
    assert labelled(store, ws) == {}  # nothing recorded half
    fake.batch_polls = 0
    later = step(ws, store)
    assert later.collected_jobs == 1 and later.labelled == len(failure_ids(ws))


def test_a_poll_that_gets_no_answer_ends_at_the_request_deadline(
        ws: Workspace, store: Store, fake: FakeGemini) -> None:
    assert step(ws, store).submitted_jobs == 1
    fake.push_batch("get_stall")
    started = time.monotonic()
    with pytest.raises(BatchError, match=r"polling batches/\S+: no answer within 0.5s"):
        step(ws, store, call_timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert labelled(store, ws) == {}
    fake.batch_polls = 0
    assert step(ws, store).labelled == len(failure_ids(ws))


def test_the_batch_deadline_is_a_setting(ws: Workspace, store: Store, fake: FakeGemini) -> None:
    settings = Settings.from_env({"FAILLAB_BATCH_DEADLINE": "2s", "FAILLAB_GEMINI_TIMEOUT": "3s"})
    options = GEMINI.with_defaults(settings)
    assert (options.batch_deadline_s, options.timeout_s) == (2.0, 3.0)
    fake.batch_polls = 10**6
    assert step(ws, store).submitted_jobs == 1
    started = time.monotonic()
    with pytest.raises(BatchError, match="deadline of 2s"):
        step(ws, store, options, wait=True, poll_every_s=0.05, sleep=time.sleep)
    assert time.monotonic() - started < 12

