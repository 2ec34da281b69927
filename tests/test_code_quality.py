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


#: Exceptions that never reach a user: each is caught inside its module and turned into one
#: that does (a too-deep JSON document into an ImportProblem naming the file; a spans file
#: without content into one naming the file that holds it).
INTERNAL_SIGNALS = {"NestingTooDeep", "NoContent"}


def test_every_error_a_user_can_cause_derives_from_the_root() -> None:
    """One error root: the CLI catches ``FaillabError`` alone and prints it as one line."""
    import importlib
    import inspect
    import pkgutil

    from faillab_core.errors import FaillabError

    outside: list[str] = []
    for package in ("faillab_core", "taxonomy", "trajectories", "labeling", "analysis"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if ".migrations" in info.name or info.name.endswith("__main__"):
                continue  # alembic's scripts run on import; entry points start a program
            module = importlib.import_module(info.name)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if (cls.__module__ == module.__name__ and issubclass(cls, BaseException)
                        and not name.startswith("_") and name not in INTERNAL_SIGNALS
                        and not issubclass(cls, FaillabError)):
                    outside.append(f"{info.name}.{name}")
    assert outside == []


def test_no_module_over_500_lines_outside_the_demo_catalogue() -> None:
    long = {str(p.relative_to(REPO)): n
            for package in ("trajectories", "labeling", "taxonomy", "analysis", "faillab", "app")
            for p in (REPO / package).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500
            and p.relative_to(REPO).as_posix() != "trajectories/demo/ehr.py"}
    assert long == {}
