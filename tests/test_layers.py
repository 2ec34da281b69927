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
