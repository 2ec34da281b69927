"""Pre-labelling as the CLI, the worker and the app use it: domain glue around the runner.

``run_prelabelling`` selects the workspace's failed trajectories, builds the labeller from the
options, runs it with the annotation store as the cache (so a second run, or a run resumed after
a crash, pays only for what is missing) and keeps a ``prelabel_runs`` record up to date while it
goes, so that another process (the app page) can poll the progress.

Which pre-labelled items people see first is decided in ``labeling.prelabel.routing``.

Privacy interlock (one rule for every entry point, enforced here so that it cannot be skipped by
calling the worker directly): the heuristic labeller never sends data anywhere. Any Gemini run,
Developer API or Vertex AI, needs an explicit acknowledgement, ``allow_external=True`` (CLI
``--yes-send-data``, the page's confirmation checkbox) or ``FAILLAB_ALLOW_EXTERNAL_LLM=1`` in the
environment, and is refused before any trajectory is read otherwise. Vertex AI is not exempt:
it *can* be zero-retention, but only once the project is configured for it, which this program
cannot check; the acknowledgement is the person's statement that the data may go where it goes.
Callers show ``privacy_notice`` (see ``privacy_text``) before asking for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from labeling.prelabel.base import PrelabelKey, PrelabelRecord, RunStats
from labeling.prelabel.heuristic import HeuristicLabeller
from labeling.prelabel.prompt import PROMPT_VERSION
from labeling.prelabel.runner import (
    AnyLabeller,
    PrelabelRunAborted,
    estimate_cost_usd,
    run_prelabels,
)
from labeling.store.errors import StoreError
from taxonomy import Taxonomy, TaxonomyError, default_taxonomy, load_taxonomy
from trajectories.model import Trajectory

if TYPE_CHECKING:
    from faillab.settings import Settings
    from labeling.store import PrelabelRun, Store
    from trajectories.workspace import Workspace

__all__ = [
    "ALLOW_EXTERNAL_ENV",
    "LABELLERS",
    "ConsentRequiredError",
    "PrelabelOptions",
    "PrelabelOutcome",
    "PrelabelServiceError",
    "RunProgress",
    "build_labeller",
    "external_allowed_by_env",
    "failed_trajectories",
    "labeller_identity",
    "launch_worker",
    "load_run_taxonomy",
    "mark_dead_run",
    "privacy_text",
    "require_consent",
    "run_log_path",
    "run_prelabelling",
    "sends_data",
    "worker_command",
]

LABELLERS: tuple[str, ...] = ("heuristic", "gemini")
ALLOW_EXTERNAL_ENV = "FAILLAB_ALLOW_EXTERNAL_LLM"
_TRUE = frozenset({"1", "true", "yes", "on"})


class PrelabelServiceError(Exception):
    """A problem the person running pre-labelling can fix (one line, no traceback)."""


class ConsentRequiredError(PrelabelServiceError):
    """Data would leave the machine without the person's explicit acknowledgement."""


@dataclass(frozen=True)
class PrelabelOptions:
    """What to run. ``None`` fields fall back to the settings (``with_defaults``)."""

    labeller: str = "heuristic"
    model: str | None = None  # Gemini model; ignored by the heuristic
    concurrency: int = 8
    limit: int | None = None  # most trajectories *sent* this run; cached ones do not count
    taxonomy_path: Path | None = None  # None: the default taxonomy
    vertex: bool | None = None  # None: Vertex AI when the settings name a project
    project: str | None = None
    location: str | None = None
    base_url: str | None = None  # API address override (tests: the local fake server)
    allow_external: bool = False  # the person acknowledged the privacy notice

    def __post_init__(self) -> None:
        if self.labeller not in LABELLERS:
            raise PrelabelServiceError(
                f"unknown labeller {self.labeller!r}; choose one of {', '.join(LABELLERS)}"
            )
        if self.concurrency < 1:
            raise PrelabelServiceError("concurrency must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise PrelabelServiceError("limit must be at least 1 (omit it for no limit)")

    def with_defaults(self, settings: Settings) -> PrelabelOptions:
        if self.labeller != "gemini":
            return self
        vertex = self.vertex if self.vertex is not None else bool(settings.vertex_project)
        return replace(
            self,
            model=self.model or settings.gemini_model,
            vertex=vertex,
            project=self.project or (settings.vertex_project or None if vertex else None),
            location=self.location or (settings.vertex_location or None if vertex else None),
            # The Developer API override must not leak into a Vertex client (other address).
            base_url=self.base_url or (None if vertex else settings.gemini_base_url or None),
        )

    def worker_args(self) -> list[str]:
        """The same options as ``python -m labeling.prelabel.worker`` arguments."""
        args = ["--labeler", self.labeller, "--concurrency", str(self.concurrency)]
        if self.model:
            args += ["--model", self.model]
        if self.limit is not None:
            args += ["--limit", str(self.limit)]
        if self.taxonomy_path is not None:
            args += ["--taxonomy", str(self.taxonomy_path)]
        if self.vertex is not None:
            args.append("--vertex" if self.vertex else "--no-vertex")
        if self.project:
            args += ["--project", self.project]
        if self.location:
            args += ["--location", self.location]
        if self.allow_external:
            args.append("--yes-send-data")
        # base_url is deliberately not passed: the worker reads it from its environment, like
        # every other setting.
        return args


@dataclass
class RunProgress(RunStats):
    """Live counters of a run (the runner's counters plus how far it got), as written to its
    ``prelabel_runs`` record."""

    total: int = 0
    done: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class PrelabelOutcome:
    run_id: int
    stats: RunStats
    taxonomy_version: str
    labeller: str
    model: str
    errors: list[str] = field(default_factory=list)


# -- privacy ------------------------------------------------------------------------------------


def sends_data(options: PrelabelOptions) -> bool:
    """Whether this run sends trajectory text to an online service."""
    return options.labeller == "gemini"


def external_allowed_by_env(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(ALLOW_EXTERNAL_ENV, "").strip().lower() in _TRUE


def privacy_text(options: PrelabelOptions) -> str:
    """The notice to show before a run that sends data (empty for the heuristic)."""
    if not sends_data(options):
        return ""
    from labeling.prelabel.gemini import privacy_notice

    return privacy_notice(bool(options.vertex))


def require_consent(options: PrelabelOptions, env: Mapping[str, str] | None = None) -> None:
    """Raise ``ConsentRequiredError`` unless the run keeps data local or was acknowledged."""
    if not sends_data(options) or options.allow_external or external_allowed_by_env(env):
        return
    where = "Vertex AI" if options.vertex else "the Gemini Developer API"
    raise ConsentRequiredError(
        f"refusing to send trajectories to {where} without an explicit acknowledgement: read "
        f"the privacy notice, then pass --yes-send-data (or set {ALLOW_EXTERNAL_ENV}=1)"
    )


# -- labeller and data --------------------------------------------------------------------------


def load_run_taxonomy(path: Path | None) -> Taxonomy:
    try:
        return load_taxonomy(path) if path is not None else default_taxonomy()
    except TaxonomyError as e:
        raise PrelabelServiceError(str(e)) from None


def labeller_identity(options: PrelabelOptions) -> tuple[str, str, str]:
    """(name, model, prompt version) of the labeller the options describe, without building it
    (building Gemini needs credentials; the page only wants to know which cache keys to read)."""
    if options.labeller == "heuristic":
        return (HeuristicLabeller.name, HeuristicLabeller.model, HeuristicLabeller.prompt_version)
    from labeling.prelabel.gemini import DEFAULT_MODEL

    return ("gemini", options.model or DEFAULT_MODEL, PROMPT_VERSION)


def build_labeller(options: PrelabelOptions, taxonomy: Taxonomy) -> AnyLabeller:
    if options.labeller == "heuristic":
        try:
            return HeuristicLabeller(taxonomy)
        except TaxonomyError as e:
            raise PrelabelServiceError(
                f"the heuristic labeller cannot use this taxonomy: {e}"
            ) from None
    # Imported here: the SDK is heavy and the heuristic path should not pay for it.
    from labeling.prelabel.gemini import DEFAULT_MODEL, GeminiConfigError, GeminiLabeller

    try:
        return GeminiLabeller(
            options.model or DEFAULT_MODEL,
            vertexai=bool(options.vertex),
            project=options.project,
            location=options.location,
            base_url=options.base_url,
        )
    except GeminiConfigError as e:
        raise PrelabelServiceError(str(e)) from None


def failed_trajectories(ws: Workspace) -> Iterator[Trajectory]:
    """Every failed trajectory of the workspace, streamed from the Parquet parts.

    One pass over the payload batches instead of ``Workspace.get`` per id: a lookup per id is a
    query over all parts, which is quadratic at study scale."""
    wanted = {row["id"] for row in ws.list(failed=True)}
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
        p.input_tokens += record.input_tokens
        p.output_tokens += record.output_tokens


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
    labeller: AnyLabeller | None = None,
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
        lab = labeller if labeller is not None else build_labeller(options, taxonomy)
    except PrelabelServiceError:
        if run_id is not None:
            store.prelabels.update_run(run_id, status="failed")
        raise
    if run_id is None:
        run_id = store.prelabels.start_run(lab.name, lab.model)
    # Keep the rubric the pre-labels were made under (an existing version is never replaced).
    store.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())

    live = RunProgress()
    tally = _TallyingStore(store, live, counts_calls=hasattr(lab, "alabel"))
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
            lab.model, live.input_tokens, live.output_tokens
        )
        now = time.monotonic()
        # A write per item would double the store's load; twice a second is plenty to watch.
        if done == total or now - last_write >= update_every_s:
            last_write = now
            store.prelabels.update_run(run_id, **_run_fields(live))
        if progress is not None:
            progress(live)

    items = trajectories if trajectories is not None else failed_trajectories(ws)
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
                progress=on_progress,
            )
        finally:
            aclose = getattr(lab, "aclose", None)
            if aclose is not None:
                await aclose()

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
    )


# -- out-of-process runs ------------------------------------------------------------------------


def run_log_path(workspace_root: Path, run_id: int) -> Path:
    """Where a background run's output goes (the run record has no room for messages)."""
    return workspace_root / "logs" / f"prelabel-run-{run_id}.log"


def worker_command(options: PrelabelOptions, *, run_id: int, workspace_root: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "labeling.prelabel.worker",
        "--run-id",
        str(run_id),
        "--workspace",
        str(workspace_root),
        *options.worker_args(),
    ]


def launch_worker(
    options: PrelabelOptions,
    *,
    run_id: int,
    workspace_root: Path,
    database_url: str = "",
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``labeling.prelabel.worker`` for ``run_id`` and return at once.

    The worker gets its own session (``start_new_session``) so it survives a page rerun or a
    browser tab closing, and can be stopped as a group. Its output goes to ``run_log_path``."""
    child_env = dict(os.environ if env is None else env)
    child_env["FAILLAB_WORKSPACE"] = str(workspace_root)
    if database_url:
        # Through the environment, not argv: a URL may carry a password and argv is public.
        child_env["FAILLAB_DATABASE_URL"] = database_url
    # The repository root first on the path, so the worker imports this very code even when
    # the app was started from a checkout that is not installed.
    root = str(Path(__file__).resolve().parents[2])
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, child_env.get("PYTHONPATH", "")) if p
    )
    log = run_log_path(workspace_root, run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            worker_command(options, run_id=run_id, workspace_root=workspace_root),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
        )


def mark_dead_run(store: Store, run: PrelabelRun, returncode: int | None) -> PrelabelRun:
    """A worker that exited while its record still says running (killed with SIGKILL, out of
    memory) cannot update it any more: record the run as failed on its behalf."""
    if run.status != "running" or returncode is None:
        return run
    return store.prelabels.update_run(run.id, status="failed")
