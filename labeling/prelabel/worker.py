"""Out-of-process pre-labelling: ``python -m labeling.prelabel.worker --run-id N [options]``.

The app launches this so that a long run neither blocks nor dies with a page session; progress
goes to the ``prelabel_runs`` record ``N`` (which the page polls), messages to stderr (which the
app sends to the run's log file). Without ``--run-id`` a new record is created and its id
printed on stdout when the run finishes, for use from a shell.

Options mirror ``faillab prelabel``; the store and workspace come from the usual settings
(``FAILLAB_WORKSPACE``/``--workspace``, ``FAILLAB_DATABASE_URL``). The privacy interlock of
``labeling.prelabel.service`` applies here too: a Gemini run needs ``--yes-send-data`` or
``FAILLAB_ALLOW_EXTERNAL_LLM=1``.

Exit status: 0 finished, 1 refused or aborted (the record is marked failed), 2 bad arguments,
130 interrupted (SIGTERM/SIGINT; the record is marked failed and completed items are kept).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from faillab.settings import Settings
from labeling.prelabel.runner import PrelabelRunAborted
from labeling.prelabel.service import (
    LABELLERS,
    PrelabelOptions,
    PrelabelServiceError,
    privacy_text,
    run_prelabelling,
)
from labeling.store import open_store
from trajectories.workspace import Workspace


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m labeling.prelabel.worker", description=__doc__)
    p.add_argument("--run-id", type=int, default=None)
    p.add_argument("--workspace", type=Path, default=None)
    p.add_argument("--labeler", choices=LABELLERS, default="heuristic")
    p.add_argument("--model", default=None)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--taxonomy", type=Path, default=None)
    p.add_argument("--vertex", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--project", default=None)
    p.add_argument("--location", default=None)
    p.add_argument("--yes-send-data", action="store_true")
    return p


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Raised inside the run, so the service marks the record failed on the way out.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    settings = Settings.from_env(workspace=args.workspace)
    try:
        options = PrelabelOptions(
            labeller=args.labeler,
            model=args.model,
            concurrency=args.concurrency,
            limit=args.limit,
            taxonomy_path=args.taxonomy,
            vertex=args.vertex,
            project=args.project,
            location=args.location,
            allow_external=args.yes_send_data,
        ).with_defaults(settings)
    except PrelabelServiceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not settings.database_url:
        settings.workspace.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.annotations_url())
    if args.run_id is not None:
        # The page created the run record; record this process so liveness can be checked.
        store.prelabels.update_run(args.run_id, pid=os.getpid())
    try:
        notice = privacy_text(options)
        if notice:
            print(f"privacy: {notice}", file=sys.stderr, flush=True)
        try:
            outcome = run_prelabelling(
                Workspace(settings.workspace), store, options, run_id=args.run_id
            )
        except PrelabelServiceError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        except PrelabelRunAborted as e:
            s = e.stats
            print(
                f"error: {e} (kept {s.labelled} new labels; run again to resume)", file=sys.stderr
            )
            return 1
        except KeyboardInterrupt:
            print("interrupted; completed items are kept", file=sys.stderr)
            return 130
        s = outcome.stats
        if args.run_id is None:
            print(outcome.run_id, flush=True)
        print(
            f"run {outcome.run_id}: labelled {s.labelled}, cached {s.cached}, failed {s.failed}, "
            f"calls {s.calls}, tokens {s.input_tokens + s.output_tokens}, "
            f"estimated cost ${s.estimated_cost_usd:.4f}",
            file=sys.stderr,
        )
        for line in s.errors[:20]:
            print(f"failed: {line}", file=sys.stderr)
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    raise SystemExit(main())
