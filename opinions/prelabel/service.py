"""Pre-labelling a workspace: select its failures, run the labeller, keep the run record.

``run_prelabelling`` selects the workspace's failed trajectories, builds the labeller from the
options, runs it with the annotation store as the cache (so a second run, or a run resumed after
a crash, pays only for what is missing) and keeps a ``prelabel_runs`` record up to date while it
goes, so that another process (the app page) can poll the progress. The privacy interlock
(``consent.py``) is checked here, so that no entry point can skip it.

Neighbours: options (``options.py``), consent (``consent.py``, over ``llm.privacy``), which labeller
(``labellers.py``), background runs (``launch.py``), large runs (``batch.py``), who reviews what
(``routing.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from labeling.store.errors import StoreError
from llm.pricing import estimate_cost_usd, labeller_prices
from opinions.prelabel.base import PrelabelKey, PrelabelRecord, RunStats
from opinions.prelabel.consent import require_consent
from opinions.prelabel.labellers import build_labeller, load_run_taxonomy
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.protocol import Labeller
from opinions.prelabel.run_errors import PrelabelRunAborted, PrelabelServiceError
from opinions.prelabel.runner import run_prelabels
from trajectories.model import Trajectory
from trajectories.outcome import NO_PEOPLE, PeopleVerdicts

if TYPE_CHECKING:
    from labeling.store import Store
    from trajectories.workspace import Workspace

__all__ = [
    "PrelabelOutcome",
    "RunProgress",
    "failed_trajectories",
    "run_prelabelling",
]


@dataclass
class RunProgress(RunStats):
    """Live counters of a run (the runner's counters plus how far it got), as written to its
    ``prelabel_runs`` record."""

    total: int = 0
    done: int = 0


@dataclass
class PrelabelOutcome:
    run_id: int
    stats: RunStats
    taxonomy_version: str
    labeller: str
    model: str
    errors: list[str] = field(default_factory=list)
    # How the answers were asked for, for labellers that choose (the OpenAI-compatible one:
    # "json_schema" | "json_object" | "text"; None when nothing was sent), and the formats the
    # server refused first.
    structured_output: str | None = None
    structured_output_refused: tuple[str, ...] = ()


# -- data ------------------------------------------------------------------------------------


def failed_trajectories(ws: Workspace, people: PeopleVerdicts = NO_PEOPLE
                        ) -> Iterator[Trajectory]:
    """Every trajectory that needs a person (``trajectories.outcome``: the failures, with
    ``people``'s verdicts winning, and what a person can still decide), streamed from the
    Parquet parts: the same set the Annotate queue hands out, so every item a person is
    given has its pre-label.

    One pass over the payload batches instead of ``Workspace.get`` per id: a lookup per id is a
    query over all parts, which is quadratic at study scale."""
    wanted = {row["id"] for row in ws.list(needing_a_person=True, people=people)}
    if not wanted:
        return
    for batch in ws.iter_payload_batches():
        for tid, payload, _exact in batch:
            if tid in wanted:
                wanted.discard(tid)  # a trajectory stored twice is labelled once
                yield Trajectory.model_validate_json(payload)


# -- running ------------------------------------------------------------------------------------


class _TallyingStore:
    """Passes through to the store, counting what the runner saves, so that live progress can
    show labelled/failed/calls/tokens (the runner's own ``RunStats`` arrives only at the end)."""

    def __init__(self, store: Store, progress: RunProgress, counts_calls: bool) -> None:
        self._store = store
        self._progress = progress
        self._counts_calls = counts_calls

    def get(self, key: PrelabelKey) -> PrelabelRecord | None:
        return self._store.prelabels.get(key)

    def save(self, record: PrelabelRecord) -> None:
        self._store.prelabels.save(record)
        p = self._progress
        if record.ok:
            p.labelled += 1
        else:
            p.failed += 1
        # For API labellers every saved record's ``attempts`` is the number of requests made
        # for it; the heuristic makes none.
        if self._counts_calls:
            p.calls += record.attempts
        p.add(record)


def _run_fields(p: RunProgress) -> dict[str, object]:
    return {
        "total": p.total,
        "done": p.done,
        "labelled": p.labelled,
        "cached": p.cached,
        "failed": p.failed,
        "calls": p.calls,
        "tokens": p.tokens,
        "estimated_cost": round(p.estimated_cost_usd, 6),
    }


def _progress_from_stats(stats: RunStats, total: int) -> RunProgress:
    counters = {f.name: getattr(stats, f.name) for f in fields(RunStats) if f.name != "errors"}
    return RunProgress(total=total, done=stats.labelled + stats.cached + stats.failed,
                       **counters)


def run_prelabelling(
    ws: Workspace,
    store: Store,
    options: PrelabelOptions,
    *,
    run_id: int | None = None,
    progress: Callable[[RunProgress], None] | None = None,
    labeller: Labeller | None = None,
    env: Mapping[str, str] | None = None,
    update_every_s: float = 0.5,
    heartbeat_every_s: float = 30.0,
    trajectories: Iterable[Trajectory] | None = None,
) -> PrelabelOutcome:
    """Pre-label the workspace's failures; see the module docstring.

    ``run_id`` continues an existing ``prelabel_runs`` record (the app creates one before it
    launches the worker); otherwise one is created. The record is marked ``done`` or ``failed``
    in every case, including an interrupt. Raises ``ConsentRequiredError`` /
    ``PrelabelServiceError`` before anything is sent, and ``PrelabelRunAborted`` (with the stats
    of what was completed and saved) when the service refuses every call."""
    try:
        require_consent(options, env)
        taxonomy = load_run_taxonomy(options.taxonomy_path)
        lab = labeller if labeller is not None else build_labeller(
            options, taxonomy, ehr_path=ws.ehr_path
        )
    except PrelabelServiceError:
        if run_id is not None:
            store.prelabels.update_run(run_id, status="failed")
        raise
    if run_id is None:
        run_id = store.prelabels.start_run(lab.name, lab.model)
    # Keep the rubric the pre-labels were made under (an existing version is never replaced).
    store.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())

    live = RunProgress()
    tally = _TallyingStore(store, live, counts_calls=lab.remote)
    last_write = 0.0
    first_report = True

    def on_progress(done: int, total: int) -> None:
        nonlocal last_write, first_report
        if first_report:
            # The runner reports once before any call, counting cached items as done.
            live.cached = done
            first_report = False
        live.done, live.total = done, total
        live.estimated_cost_usd = estimate_cost_usd(
            lab.model, live.input_tokens, live.output_tokens, prices=labeller_prices(lab)
        )
        now = time.monotonic()
        # A write per item would double the store's load; twice a second is plenty to watch.
        if done == total or now - last_write >= update_every_s:
            last_write = now
            store.prelabels.update_run(run_id, **_run_fields(live))
        if progress is not None:
            progress(live)

    items = trajectories if trajectories is not None \
        else failed_trajectories(ws, store.verdicts.effective())
    # A heartbeat between progress writes too (one slow LLM call can take minutes), so a run
    # only reads as "interrupted" when this process is really gone.
    stop_beating = threading.Event()

    def beat() -> None:
        while not stop_beating.wait(heartbeat_every_s):
            with contextlib.suppress(StoreError):
                store.prelabels.heartbeat_run(run_id)

    threading.Thread(target=beat, name=f"prelabel-heartbeat-{run_id}", daemon=True).start()

    async def go() -> RunStats:
        try:
            return await run_prelabels(
                items,
                lab,
                taxonomy,
                tally,
                concurrency=options.concurrency,
                limit=options.limit,
                item_deadline_s=options.item_deadline_s,
                run_deadline_s=options.run_deadline_s,
                progress=on_progress,
            )
        finally:
            await lab.aclose()

    try:
        stats = asyncio.run(go())
    except PrelabelRunAborted as e:
        stop_beating.set()
        final = _progress_from_stats(e.stats, live.total)
        store.prelabels.update_run(run_id, status="failed", **_run_fields(final))
        raise
    except BaseException:
        stop_beating.set()
        # Interrupted (SIGTERM, Ctrl-C) or a bug: what was saved stays saved; the record says
        # the run did not finish so the page stops showing it as running.
        store.prelabels.update_run(run_id, status="failed", **_run_fields(live))
        raise
    stop_beating.set()
    final = _progress_from_stats(stats, live.total)
    store.prelabels.update_run(run_id, status="done", **_run_fields(final))
    return PrelabelOutcome(
        run_id=run_id,
        stats=stats,
        taxonomy_version=taxonomy.version,
        labeller=lab.name,
        model=lab.model,
        errors=list(stats.errors),
        structured_output=getattr(lab, "structured_output", None),
        structured_output_refused=tuple(getattr(lab, "structured_output_refused", ())),
    )
