"""Pre-labelling at study scale: Gemini's Batch API (half price, answers within a day).

``advance_batch`` is one idempotent step, run again until everything is in:

1. No batch in progress: the failures without a usable pre-label are planned (prompts built,
   input tokens counted, cost estimated at batch prices; prompts are streamed, never all held
   in memory) and the plan is shown (``on_plan``) *before* the privacy interlock is checked, so
   a run without ``--yes-send-data`` shows what it would cost and sends nothing. Then the
   prompts are submitted as one or more jobs of inlined requests (each under
   ``max_job_bytes``; the API takes 20 MB of inlined requests per job).
2. A batch in progress: every unfinished job is polled; a finished job's answers are parsed
   exactly as interactive answers are (``GeminiLabeller.parse_response``) and saved into the
   same store, under the same cache keys, as the interactive runner's. A failed, cancelled or
   expired job records its items as failures, which the next submission sends again.

The batch (job names, the trajectory ids of each job, which jobs were collected) is kept in
``prelabel-batch.json`` in the workspace, rewritten atomically after every job submitted or
collected, and every step holds ``prelabel-batch.json.lock`` (``faillab_core.locks``), so a
restarted or concurrent process neither submits twice nor loses a job. A job is recorded (by a
unique display name) before its creation call, so one whose answer was lost is found again, not
resubmitted.
Saving is an upsert by cache key, so collecting a job again after a crash writes no duplicate.

Every step ends on time: each job-level call (create, list, get) within the request deadline
(``FAILLAB_GEMINI_TIMEOUT``; the SDK's own timeout bounds each read, so a server that drips
bytes would hold it for ever) and the whole step, polling with ``wait`` included, within
``FAILLAB_BATCH_DEADLINE``. Then it stops with one line (``BatchError``); what was collected is
in the store, the jobs still running stay in the state file, and running the same command again
continues.

Batch jobs go to the Gemini Developer API with an API key, which is not zero-retention: the
privacy notice applies as for interactive runs. Vertex AI batch jobs read their input from Cloud
Storage or BigQuery, which this program does not set up; they are refused with a clear message.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faillab_core.locks import LockBusyError, MachineLock
from llm.backends import backend, backends
from llm.errors import InvalidAnswerError
from llm.names import DEFAULT_GEMINI_TIMEOUT_S
from llm.pricing import estimate_cost_usd
from llm.retry import Deadline
from opinions.prelabel.base import PrelabelKey, PrelabelRecord
from opinions.prelabel.batch_calls import Calls
from opinions.prelabel.batch_state import (
    STATE_FILE,
    BatchError,
    BatchJobRecord,
    BatchReport,
    BatchState,
    load_state,
    save_state,
    state_path,
)
from opinions.prelabel.consent import require_consent
from opinions.prelabel.labellers import load_run_taxonomy
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.prompt import DEFAULT_TOKEN_BUDGET, PROMPT_VERSION, build_prompt
from opinions.prelabel.run_errors import PrelabelServiceError
from opinions.prelabel.service import failed_trajectories
from trajectories.model import Trajectory
from trajectories.outcome import NO_PEOPLE, PeopleVerdicts

if TYPE_CHECKING:
    from labeling.store import Store
    from opinions.prelabel.llm_labeller import GeminiLabeller
    from taxonomy import Taxonomy
    from trajectories.workspace import Workspace

__all__ = [
    "ASSUMED_OUTPUT_TOKENS",
    "STATE_FILE",
    "BatchError",
    "BatchJobRecord",
    "BatchReport",
    "BatchState",
    "advance_batch",
    "load_state",
    "state_path",
]

# Inlined requests per job must stay under 20 MB; the margin covers the JSON envelope.
MAX_JOB_BYTES = 15_000_000
# For the estimate only: the answer is a short JSON object, but a thinking model bills its
# reasoning as output too. The collected figures use the real usage.
ASSUMED_OUTPUT_TOKENS = 500
_DONE_STATES = frozenset(
    {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
     "JOB_STATE_PARTIALLY_SUCCEEDED"}
)


# -- planning and submitting --------------------------------------------------------------------


@dataclass(frozen=True)
class _Planned:
    trajectory_id: str
    tokens: int


def _prompts(ws: Workspace, taxonomy: Taxonomy, wanted: set[str] | None,
             people: PeopleVerdicts = NO_PEOPLE) -> Iterator[tuple[str, str, int]]:
    """(trajectory id, prompt, approximate tokens) of the workspace's failures (``wanted``
    only, when given), streamed: at study scale the prompts together do not fit in memory."""
    for t in failed_trajectories(ws, people):
        tid = t.id or t.content_id()
        if wanted is None or tid in wanted:
            prompt = build_prompt(t, taxonomy, token_budget=DEFAULT_TOKEN_BUDGET)
            yield tid, prompt.text, prompt.approx_tokens


def _plan(ws: Workspace, store: Store, taxonomy: Taxonomy, model: str, limit: int | None,
          report: BatchReport) -> list[_Planned]:
    known = store.prelabels.get_many(taxonomy.version, PROMPT_VERSION, model)
    planned: list[_Planned] = []
    for tid, _text, tokens in _prompts(ws, taxonomy, None, store.verdicts.effective()):
        rec = known.get(tid)
        if rec is not None and rec.ok:
            report.cached += 1
        elif limit is None or len(planned) < limit:
            planned.append(_Planned(tid, tokens))
    return planned


def _chunks(items: Iterator[tuple[str, str, int]], max_bytes: int
            ) -> Iterator[list[tuple[str, str]]]:
    chunk: list[tuple[str, str]] = []
    size = 0
    for tid, text, _tokens in items:
        n = len(text.encode()) + 1024  # the per-request envelope (schema, metadata)
        if chunk and size + n > max_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append((tid, text))
        size += n
    if chunk:
        yield chunk


def _submit(ws: Workspace, lab: GeminiLabeller, taxonomy: Taxonomy, planned: list[_Planned],
            state: BatchState, path: Path, max_job_bytes: int, calls: Calls,
            report: BatchReport, people: PeopleVerdicts = NO_PEOPLE) -> None:
    from google.genai import types

    config = lab.generation_config(taxonomy)
    wanted = {p.trajectory_id for p in planned}
    # The prompts are built again here, a job's worth at a time, rather than kept from planning.
    for i, chunk in enumerate(_chunks(_prompts(ws, taxonomy, wanted, people), max_job_bytes)):
        requests = [
            types.InlinedRequest(contents=text, config=config, metadata={"key": tid})
            for tid, text in chunk
        ]
        display = f"faillab-prelabel-{uuid.uuid4().hex[:12]}-{i + 1}"
        record = BatchJobRecord("", [tid for tid, _ in chunk], display_name=display)
        # Recorded before the call: if this process dies before the answer is saved, the next
        # step finds the job by its display name instead of submitting (and paying) twice.
        state.jobs.append(record)
        save_state(path, state)
        job_config = types.CreateBatchJobConfig(display_name=display)

        def create(src: list[types.InlinedRequest] = requests,
                   cfg: types.CreateBatchJobConfig = job_config) -> types.BatchJob:
            return lab.client.batches.create(model=lab.model, src=src, config=cfg)

        try:
            job = calls(create, "submitting a batch job")
        except BatchError as e:
            if _answered(e.__cause__):  # the service said no: no job exists
                state.jobs.remove(record)
                save_state(path, state)
            raise
        record.name, record.state = str(job.name), _state_name(job.state)
        save_state(path, state)
        report.submitted_jobs += 1


def _answered(err: BaseException | None) -> bool:
    from google.genai import errors as genai_errors

    return isinstance(err, genai_errors.APIError)


def _adopt_unnamed(lab: GeminiLabeller, state: BatchState, path: Path, calls: Calls) -> None:
    """Jobs whose creation answer never arrived: found among the service's jobs by display
    name, or dropped (their items were not submitted and are planned again later)."""
    unnamed = [j for j in state.jobs if not j.name]
    if not unnamed:
        return
    jobs = calls(lambda: list(lab.client.batches.list()), "listing batch jobs")
    by_display = {str(j.display_name): j for j in jobs if j.display_name}
    for record in unnamed:
        found = by_display.get(record.display_name)
        if found is None:
            state.jobs.remove(record)
        else:
            record.name, record.state = str(found.name), _state_name(found.state)
    save_state(path, state)


def _state_name(state: Any) -> str:
    return str(getattr(state, "value", state) or "JOB_STATE_PENDING")


# -- collecting ---------------------------------------------------------------------------------


def _trajectories(ws: Workspace, ids: set[str]) -> dict[str, Trajectory]:
    found: dict[str, Trajectory] = {}
    if not ids:
        return found
    for batch in ws.iter_payload_batches():
        for tid, payload, _exact in batch:
            if tid in ids and tid not in found:
                found[tid] = Trajectory.model_validate_json(payload)
    return found


def _collect(store: Store, lab: GeminiLabeller, taxonomy: Taxonomy, state: BatchState,
             job: BatchJobRecord, remote: Any, trajectories: Mapping[str, Trajectory],
             report: BatchReport) -> None:
    def key(tid: str) -> PrelabelKey:
        return PrelabelKey(tid, state.taxonomy_version, state.prompt_version, state.model)

    labelled: list[PrelabelRecord] = []
    failures: list[PrelabelRecord] = []

    def save_failure(tid: str, error: str, in_tok: int = 0, out_tok: int = 0) -> None:
        failures.append(PrelabelRecord(key(tid), None, error, in_tok, out_tok, 1))
        report.failed += 1
        report.errors.append(f"{tid}: {error}")

    answers: dict[str, Any] = {}
    dest = getattr(remote, "dest", None)
    inlined = list(getattr(dest, "inlined_responses", None) or [])
    for i, item in enumerate(inlined):
        meta = item.metadata or {}
        tid = meta.get("key") or (job.keys[i] if i < len(job.keys) else None)
        if tid is not None:
            answers[str(tid)] = item
    for tid in job.keys:
        item = answers.get(tid)
        if item is None:
            save_failure(tid, f"batch: no answer ({job.name} ended {job.state})")
            continue
        if item.error is not None:
            err = item.error
            save_failure(tid, f"batch: {getattr(err, 'code', '')} {getattr(err, 'message', err)}")
            continue
        t = trajectories.get(tid)
        if t is None or item.response is None:
            save_failure(tid, "batch: the trajectory or its answer is missing")
            continue
        try:
            result, usage = lab.parse_response(item.response, t, taxonomy)
        except InvalidAnswerError as e:
            report.add(e.usage)
            save_failure(tid, f"{e.kind}: {e.message}", e.usage.input_tokens,
                         e.usage.output_tokens)
            continue
        labelled.append(PrelabelRecord(key(tid), result, None, usage.input_tokens,
                                       usage.output_tokens, 1))
        report.labelled += 1
        report.add(usage)
    # One bulk write per job; a failure never replaces a usable label (an interactive run may
    # have labelled the item meanwhile). Collecting the same job again rewrites the same rows.
    store.prelabels.save_many(labelled)
    store.prelabels.save_many(failures, keep_labels=True)


# -- the step -----------------------------------------------------------------------------------


def advance_batch(
    ws: Workspace,
    store: Store,
    options: PrelabelOptions,
    *,
    wait: bool = False,
    on_plan: Callable[[BatchReport], None] | None = None,
    labeller: GeminiLabeller | None = None,
    env: Mapping[str, str] | None = None,
    poll_every_s: float = 30.0,
    max_job_bytes: int = MAX_JOB_BYTES,
    call_attempts: int = 3,
    sleep: Callable[[float], None] = time.sleep,
    lock_timeout_s: float = 5.0,
    deadline_s: float | None = None,
    call_timeout_s: float | None = None,
) -> BatchReport:
    """Submit the missing pre-labels as batch jobs, or poll and collect the jobs in flight;
    see the module docstring. ``wait`` polls every ``poll_every_s`` until all are collected.
    The step ends by ``deadline_s`` (default: the options', from FAILLAB_BATCH_DEADLINE; None:
    no limit) and each call by ``call_timeout_s`` (default: the options' request deadline),
    else ``BatchError``."""
    if not options.uses_llm or not backend(options.labeller).batch:
        names = " or ".join(f"--labeler {b.name}" for b in backends() if b.batch)
        raise PrelabelServiceError(f"--batch needs {names} (the heuristic is offline "
                                   "and fast: run it without --batch)")
    if options.vertex:
        raise PrelabelServiceError(
            "batch jobs on Vertex AI read their input from Cloud Storage or BigQuery, which "
            "this program does not set up; run Vertex AI without --batch (interactive)")
    taxonomy = load_run_taxonomy(options.taxonomy_path)
    path = state_path(ws.root)
    report = BatchReport()
    calls = Calls(
        call_attempts, sleep,
        call_timeout_s or options.timeout_s or DEFAULT_GEMINI_TIMEOUT_S,
        Deadline(deadline_s if deadline_s is not None else options.batch_deadline_s),
    )
    lock = MachineLock(f"{path}.lock", busy_message=(
        f"another process is working on this workspace's batch ({path}.lock); "
        "wait for it to finish"))
    try:
        lock.acquire(lock_timeout_s)
    except LockBusyError as err:
        lock.close()
        raise BatchError(str(err)) from None
    try:
        state = load_state(path)
        lab: GeminiLabeller | None = labeller
        if state is not None:
            wanted = (options.model or state.model, taxonomy.version)
            if wanted != (state.model, state.taxonomy_version):
                raise BatchError(
                    f"a batch for {state.model} on taxonomy {state.taxonomy_version} is in "
                    f"progress ({path}); collect it first with the same --model/--taxonomy")
            lab = lab or _gemini(replace(options, model=state.model), taxonomy)
            _adopt_unnamed(lab, state, path, calls)
            if not state.jobs:  # nothing was really submitted: plan afresh
                path.unlink(missing_ok=True)
                state = None
        if state is None:
            model = options.model or backend(options.labeller).fallback_model
            planned = _plan(ws, store, taxonomy, model, options.limit, report)
            report.to_submit = len(planned)
            report.estimated_input_tokens = sum(p.tokens for p in planned)
            report.estimated_cost_usd = estimate_cost_usd(
                model, report.estimated_input_tokens, ASSUMED_OUTPUT_TOKENS * len(planned),
                batch=True)
            if on_plan is not None:
                on_plan(report)
            if not planned:
                return report
            require_consent(options, env)  # after the estimate, before anything is sent
            lab = lab or _gemini(options, taxonomy)
            store.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())
            state = BatchState(model, taxonomy.version, PROMPT_VERSION,
                               estimated_cost_usd=report.estimated_cost_usd)
            try:
                _submit(ws, lab, taxonomy, planned, state, path, max_job_bytes, calls, report,
                        store.verdicts.effective())
            finally:
                if not state.jobs:
                    path.unlink(missing_ok=True)  # nothing in flight: no state to keep
        gemini = lab or _gemini(replace(options, model=state.model), taxonomy)
        while True:
            finished: list[tuple[BatchJobRecord, Any]] = []
            for job in state.open_jobs:
                try:
                    remote = calls(partial(gemini.client.batches.get, name=job.name),
                                   f"polling {job.name}")
                except BatchError as e:
                    if calls.deadline.expired():  # a slow poll ran into the step's deadline
                        raise calls.expired_error(len(state.open_jobs)) from e
                    raise
                job.state = _state_name(remote.state)
                if job.state in _DONE_STATES:
                    finished.append((job, remote))
            # One pass over the workspace for every job that finished in this round.
            trajectories = _trajectories(
                ws, {k for job, _ in finished if job.state.endswith("SUCCEEDED") for k in job.keys}
            )
            for job, remote in finished:
                _collect(store, gemini, taxonomy, state, job, remote, trajectories, report)
                job.collected = True
                report.collected_jobs += 1
                save_state(path, state)
            report.running_jobs = len(state.open_jobs)
            if not wait or not report.running_jobs:
                break
            left = calls.deadline.remaining()
            if left is not None and left <= poll_every_s:
                # The next poll would come after the deadline: stop now, on time.
                sleep(left)
                raise calls.expired_error(report.running_jobs)
            sleep(poll_every_s)
        if not state.open_jobs:
            path.unlink(missing_ok=True)  # all in the store: the next step plans afresh
        report.cost_usd = estimate_cost_usd(state.model, report.input_tokens,
                                            report.output_tokens, batch=True)
        return report
    finally:
        lock.release()
        lock.close()


def _gemini(options: PrelabelOptions, taxonomy: Taxonomy) -> GeminiLabeller:
    """The Gemini labeller of the options, its client the registry's (the prompts of a batch
    carry no evidence proposal: they are built here, not by the labeller)."""
    from llm.gemini import GeminiJsonClient
    from opinions.prelabel.llm_labeller import GeminiLabeller

    client = backend(options.labeller).client(options.connection())
    assert isinstance(client, GeminiJsonClient)  # the one backend with a batch path
    return GeminiLabeller(client=client)
