"""The code stays as the project promises: ruff-clean, mypy-clean, no streamlit outside app/,
and no HTML from data ever rendered."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

BIN = Path(sys.executable).parent


def test_ruff_is_clean() -> None:
    proc = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=REPO, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_mypy_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_domain_never_imports_streamlit() -> None:
    pattern = re.compile(r"^\s*(import streamlit|from streamlit)", re.MULTILINE)
    offenders = [
        str(path.relative_to(REPO))
        for package in ("trajectories", "labeling", "taxonomy", "analysis", "faillab")
        for path in (REPO / package).rglob("*.py")
        if pattern.search(path.read_text())
    ]
    assert offenders == []


def test_no_unsafe_html_in_the_app() -> None:
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "app").rglob("*.py")
                 if "unsafe_allow_html=True" in p.read_text()]
    assert offenders == []


def test_no_module_imports_a_conftest() -> None:
    # pytest loads conftest files itself; importing one as a module runs it twice under two
    # names. Shared test helpers live in tests/support.py.
    pattern = re.compile(r"^\s*(from\s+\S*conftest\s+import|import\s+\S*conftest)", re.MULTILINE)
    offenders = [
        str(path.relative_to(REPO))
        for folder in ("tests", "bench")
        for path in (REPO / folder).rglob("*.py")
        if pattern.search(path.read_text("utf-8"))
    ]
    assert offenders == []
