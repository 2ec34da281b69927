"""The layering contract (.importlinter, run by `make lint`) holds on the code, and breaks on a
planted upward import: the check is real, not a file nobody runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

PACKAGES = ("app", "faillab", "faillab_core", "llm", "analysis", "opinions", "labeling",
            "trajectories", "taxonomy")
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
    # The planted edge is named (which edge of the cycle the tool offers to cut may vary).
    assert ".pool -> .queue" in broken.stdout or ".queue -> .pool" in broken.stdout


def test_an_import_only_a_type_checker_reads_is_not_a_dependency(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    pool = root / "labeling" / "pool.py"
    pool.write_text(pool.read_text()
                    + "\nif TYPE_CHECKING:\n    from labeling import queue  # planted\n")
    kept = _lint(root)
    assert kept.returncode == 0, kept.stdout + kept.stderr


#: Each new boundary between rooms, with an import planted across it and the contract that
#: must name it: people's work never reads a machine opinion; reading a trajectory (its
#: evidence) never reads people's work; the core reads no other package; the LLM transport reads
#: only the core, and neither the domain nor people's work reads it.
LABELING = "People's work (labeling) imports no opinion, LLM, analysis or face BROKEN"
DOMAIN = "The domain (trajectories, taxonomy) imports nothing above it BROKEN"
LLM = "The LLM transport (llm) imports only the core BROKEN"
BOUNDARIES = [
    ("labeling/pool.py", "from opinions import ranking", LABELING,
     "labeling.pool -> opinions.ranking"),
    ("trajectories/evidence/finder.py", "from labeling import pool",
     "The domain (trajectories, taxonomy) imports nothing above it BROKEN",
     "trajectories.evidence.finder -> labeling.pool"),
    ("opinions/features.py", "from analysis import sources",
     "Machine opinions (opinions) import neither analysis nor the faces BROKEN",
     "opinions.features -> analysis.sources"),
    ("faillab_core/errors.py", "from faillab.cli import common",
     "The core (faillab_core) imports no other faillab package BROKEN",
     "faillab_core.errors -> faillab.cli.common"),
    ("faillab_core/errors.py", "from llm import usage",
     "The core (faillab_core) imports no other faillab package BROKEN",
     "faillab_core.errors -> llm.usage"),
    ("llm/pricing.py", "from opinions.prelabel import options", LLM,
     "llm.pricing -> opinions.prelabel.options"),
    ("llm/retry.py", "from trajectories import model", LLM, "llm.retry -> trajectories.model"),
    ("llm/usage.py", "from labeling.store import records", LLM,
     "llm.usage -> labeling.store.records"),
    ("llm/errors.py", "from faillab.cli import common", LLM, "llm.errors -> faillab.cli.common"),
    ("trajectories/model.py", "from llm import usage", DOMAIN, "trajectories.model -> llm.usage"),
    ("taxonomy/model.py", "from llm import errors", DOMAIN, "taxonomy.model -> llm.errors"),
    ("llm/usage.py", "import streamlit", "Streamlit is imported by app/ only BROKEN",
     "llm.usage -> streamlit"),
    ("labeling/pool.py", "from llm import retry", LABELING, "labeling.pool -> llm.retry"),
]


@pytest.mark.parametrize(("path", "planted", "contract", "edge"), BOUNDARIES)
def test_each_boundary_between_rooms_breaks_on_a_planted_import(
        tmp_path: Path, path: str, planted: str, contract: str, edge: str) -> None:
    root = _copy(tmp_path)
    target = root / path
    target.write_text(target.read_text() + f"\n{planted}  # planted\n")
    broken = _lint(root)
    assert broken.returncode != 0
    assert contract in broken.stdout
    assert edge in broken.stdout
