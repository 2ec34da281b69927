"""Measure the first-divergence finder's per-part confidences on demo failures.

Usage: .venv/bin/python bench/calibrate_evidence.py [--seeds 0 2 3] [--tasks 48] [--rollouts 3]

Builds a demo with the calibration-only templates (``trajectories/demo/templates_grounding.py``;
``--default-demo`` leaves them out), whose generator records each failure's injected cause, runs
the finder executed on the demo's EHR, and prints how often the ``codes`` value rule decided
and, per deciding part: the category it went with most, how often, the
calibrated confidence (``trajectories.evidence.calibrate``) and the one in ``CALIBRATION`` now. The
real hand-labelled failures are not read: calibration must not see the evaluation set.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from trajectories.evidence import CALIBRATION, Probe, find_divergence
from trajectories.evidence.calibrate import DEMO_CAUSE_KEYS, score_parts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--tasks", type=int, default=48)
    parser.add_argument("--rollouts", type=int, default=3)
    parser.add_argument("--default-demo", action="store_true",
                        help="the default demo only, without the calibration-only templates")
    opts = parser.parse_args()
    from trajectories.demo import generate_demo

    pairs = []
    for seed in opts.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            demo = generate_demo(Path(tmp), seed=seed, n_tasks=opts.tasks,
                                 rollouts=opts.rollouts, n_patients=500,
                                 calibration=not opts.default_demo)
            fails = [t for t in demo.trajectories
                     if t.outcome is not None and not t.outcome.success]
            with Probe.open(demo.ehr_path) as probe:
                pairs += [(DEMO_CAUSE_KEYS[str((t.model_extra or {})["simulated_failure"])],
                           find_divergence(t, probe=probe)) for t in fails]
    print(f"{len(pairs)} demo failures (seeds {opts.seeds}, {opts.tasks} tasks x "
          f"{opts.rollouts} rollouts each)")
    values = [(cause, ev) for cause, ev in pairs
              if ev.divergences and "matches no row" in ev.divergences[0].reason]
    print(f"of them decided by the codes part's value rule: {len(values)}, "
          f"{sum(c == values[0][1].category for c, _ in values) if values else 0} of them "
          "with the cause it names")
    print("| part | category | demo precision | calibrated | in CALIBRATION |")
    print("|---|---|---|---|---|")
    scores = score_parts(pairs, {part: cat for part, (cat, _) in CALIBRATION.items()})
    for part in sorted(CALIBRATION):
        now = CALIBRATION[part]
        s = scores[part]
        seen = f"{s.right}/{s.seen}" if s.seen else "not produced"
        print(f"| {part} | {s.category} | {seen} | {s.confidence:.2f} | {now[0]} {now[1]:.2f} |")


if __name__ == "__main__":
    main()
