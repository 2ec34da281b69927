"""The layering contract (.importlinter, run by `make lint`) holds on the code, and breaks on a
planted upward import: the check is real, not a file nobody runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

PACKAGES = ("app", "faillab", "analysis", "labeling", "trajectories", "taxonomy")
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=root, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(root),
                                                       "PATH": "/usr/bin:/bin"})


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in PACKAGES:
        shutil.copytree(REPO / name, root / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", root / ".importlinter")
    return root


def test_the_contract_holds_and_breaks_on_a_planted_upward_import(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    kept = _lint(root)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "0 broken" in kept.stdout
    model = root / "trajectories" / "model.py"
    model.write_text(model.read_text() + "\nfrom analysis import sources  # planted\n")
    broken = _lint(root)
    assert broken.returncode != 0
    assert "The domain (trajectories, taxonomy) imports nothing above it BROKEN" in broken.stdout
    assert "trajectories.model -> analysis" in broken.stdout


def test_a_planted_cycle_between_sibling_modules_breaks_the_contract(tmp_path: Path) -> None:
    # labeling.queue reads the pool of work from labeling.pool; the pool importing the queue
    # back makes the two siblings a cycle, which the acyclic contract must name.
    root = _copy(tmp_path)
    pool = root / "labeling" / "pool.py"
    pool.write_text(pool.read_text() + "\nfrom labeling import queue  # planted\n")
    broken = _lint(root)
    assert broken.returncode != 0
    assert "No two sibling modules or packages import each other, at any depth BROKEN" \
        in broken.stdout
    assert "- .pool -> .queue (1 import)" in broken.stdout


def test_an_import_only_a_type_checker_reads_is_not_a_dependency(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    pool = root / "labeling" / "pool.py"
    pool.write_text(pool.read_text()
                    + "\nif TYPE_CHECKING:\n    from labeling import queue  # planted\n")
    kept = _lint(root)
    assert kept.returncode == 0, kept.stdout + kept.stderr
