"""What a Batch API run has in flight, kept in the workspace's ``prelabel-batch.json``: the
jobs (names, the trajectory ids of each, which were collected), and the report of one step.

The file names submitted jobs, so it is written beside and renamed over (a crash mid-write keeps
the previous state) and a damaged one is an error to repair, never a reason to start over."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faillab_core.errors import FaillabError
from llm.usage import UsageTally

STATE_FILE = "prelabel-batch.json"


class BatchError(FaillabError):
    """The batch could not be advanced (service error, another process at work); nothing that
    was submitted or collected is lost, and running again continues."""


@dataclass
class BatchJobRecord:
    name: str  # "batches/..."; "" while being submitted (recorded before the call)
    keys: list[str]  # trajectory ids, in request order
    state: str = "JOB_STATE_PENDING"
    collected: bool = False
    display_name: str = ""  # unique per job: finds a job whose creation answer was lost


@dataclass
class BatchState:
    """What is in flight: persisted in the workspace so that any later process can collect."""

    model: str
    taxonomy_version: str
    prompt_version: str
    jobs: list[BatchJobRecord] = field(default_factory=list)
    estimated_cost_usd: float = 0.0

    @property
    def open_jobs(self) -> list[BatchJobRecord]:
        return [j for j in self.jobs if j.name and not j.collected]


@dataclass
class BatchReport(UsageTally):
    """What one Batch API step did; the inherited tallies count the collected jobs' tokens."""

    to_submit: int = 0  # trajectories planned for submission by this step
    estimated_input_tokens: int = 0
    estimated_cost_usd: float = 0.0
    cached: int = 0
    submitted_jobs: int = 0
    running_jobs: int = 0
    collected_jobs: int = 0
    labelled: int = 0
    failed: int = 0
    cost_usd: float = 0.0  # of what was collected, at batch list prices
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        parts = [f"cached {self.cached}"]
        if self.submitted_jobs:
            parts.append(f"submitted {self.to_submit} trajectories in {self.submitted_jobs} "
                         f"job(s)")
        if self.collected_jobs:
            parts.append(f"collected {self.collected_jobs} job(s): labelled {self.labelled}, "
                         f"failed {self.failed}; tokens {self.input_tokens} in, "
                         f"{self.output_tokens} out; estimated cost ${self.cost_usd:.4f}")
        if self.running_jobs:
            parts.append(f"{self.running_jobs} job(s) still running: run the same command "
                         "again later to collect them")
        elif not self.submitted_jobs and not self.collected_jobs:
            parts.append("nothing to do")
        return "; ".join(parts)


# -- the state file -----------------------------------------------------------------------------


def state_path(workspace_root: Path) -> Path:
    return workspace_root / STATE_FILE


def load_state(path: Path) -> BatchState | None:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise BatchError(f"cannot read the batch state {path}: {e}; it names the submitted "
                         "jobs, so repair it rather than deleting it") from None
    problem = _shape_problem(raw)
    if problem is None:
        try:
            jobs = [BatchJobRecord(**j) for j in raw.pop("jobs")]
            return BatchState(jobs=jobs, **raw)
        except TypeError as e:  # a field the state does not have, or one missing
            problem = str(e)
    raise BatchError(f"the batch state {path} is not in the expected shape: {problem}; it "
                     "names the submitted jobs, so repair it rather than deleting it")


def _shape_problem(raw: Any) -> str | None:
    """What is wrong with the decoded state file, or None (field names are checked after)."""
    if not isinstance(raw, dict):
        return f"expected an object, found {type(raw).__name__}"
    for key in ("model", "taxonomy_version", "prompt_version"):
        if not isinstance(raw.get(key), str):
            return f"{key!r} is not a string"
    jobs = raw.get("jobs")
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        return "'jobs' is not a list of objects"
    for j in jobs:
        keys = j.get("keys")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            return "a job's 'keys' is not a list of trajectory ids"
        if not all(isinstance(j.get(f, ""), str) for f in ("name", "state", "display_name")):
            return "a job's name, state or display name is not a string"
    return None


def save_state(path: Path, state: BatchState) -> None:
    # Written beside and renamed over: a crash mid-write leaves the previous state intact.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(asdict(state), indent=1))
    os.replace(tmp, path)
