"""Fixtures shared by every test package."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import (
    REAL_TRAJECTORIES,
    ImportedWorkspace,
    in_ci,
    make_trajectory,
    require_shared,
)
from trajectories.model import Trajectory

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """With CI set, a skipped test is a failed one: in CI every test must run (shared data,
    PostgreSQL and Chromium are all there), so a skip can only hide a broken set-up."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI={os.environ.get('CI')}): {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """The same for a whole module skipped at collection (importorskip, module-level skip)."""
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if report.skipped and in_ci():
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI={os.environ.get('CI')}): {report.longrepr}"


@pytest.fixture
def real_trajectory_files() -> list[Path]:
    return sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))


@pytest.fixture
def trajectory_factory() -> Callable[..., Trajectory]:
    return make_trajectory


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic demo workspace (EHR database + trajectories), built once per session.

    Tests must not modify it; copy it (shutil.copytree) when a test needs to write."""
    from trajectories.demo import generate_demo
    from trajectories.workspace import Workspace

    root = tmp_path_factory.mktemp("demo") / "ws"
    ws = Workspace(root).create()
    result = generate_demo(root, seed=0, n_tasks=72, rollouts=2, n_patients=300)
    ws.add((t, "demo") for t in result.trajectories)
    return root


@pytest.fixture(scope="session")
def prelabelled_demo_workspace(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
                               ) -> Path:
    """The demo workspace after `faillab prelabel --labeler heuristic` (the offline heuristic's
    pre-label of every failure, in the workspace's own annotations.sqlite), built once per
    session.

    Tests must not modify it; copy it (shutil.copytree copies the store with it) when a test
    needs to write."""
    from concurrent.futures import ThreadPoolExecutor

    from click.testing import CliRunner

    from faillab.cli import main

    root = tmp_path_factory.mktemp("prelabelled") / "ws"
    shutil.copytree(demo_workspace, root)
    args = ["prelabel", "--labeler", "heuristic", "--workspace", str(root)]
    # The pre-labels go to the workspace's own store, whatever the developer's shell points at.
    env: dict[str, str | None] = {
        k: None for k in ("FAILLAB_DATABASE_URL", "FAILLAB_WORKSPACE", "FAILLAB_TRAJECTORIES_URL")}
    # In a thread of its own: the command calls asyncio.run(), which fails in a thread with a
    # running event loop (a browser test's Playwright keeps one open in the main thread).
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(CliRunner().invoke, main, args, env=env).result()
    assert result.exit_code == 0, (result.output, result.exception)
    assert (root / "annotations.sqlite").exists(), result.output
    return root


@pytest.fixture(scope="session")
def real_workspace(tmp_path_factory: pytest.TempPathFactory) -> ImportedWorkspace:
    """Every real ai612 tau-bench log (../shared/data) imported into one workspace once per
    session, with the import's report.

    Tests must not modify it; copy it (shutil.copytree) when a test needs to write."""
    from trajectories.workspace import Workspace

    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    root = tmp_path_factory.mktemp("real") / "ws"
    report = Workspace(root).import_files(files)
    return ImportedWorkspace(root, report)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A real Chromium (Debian's, through Playwright) for the browser and deployment tests.

    Module scope: Playwright's sync API keeps an event loop running in this thread while it
    is open, which would break later tests that call asyncio.run()."""
    from playwright.sync_api import sync_playwright

    from tests.browser.support import CHROMIUM, LAUNCH_ARGS

    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM}: run 'make test' (it installs chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture(autouse=True)
def _keep_the_main_module() -> Iterator[None]:
    """Put back the process's ``__main__`` after each test. Streamlit's in-process test runner
    leaves the last page script it ran there, and a later test in the same worker that starts
    processes with "spawn" (sign-in races, store concurrency) would have every child run that
    script first and die before reporting: an order-dependent hang, not a failure of theirs."""
    main = sys.modules.get("__main__")
    yield
    if main is not None and sys.modules.get("__main__") is not main:
        sys.modules["__main__"] = main
