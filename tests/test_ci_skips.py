"""In CI nothing may skip: the conftest hook turns a skip into a failure when CI is set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()


def test_skip_probe() -> None:
    # Driven by the tests below through a child pytest; in a normal run it just passes.
    if os.environ.get("FAILLAB_SKIP_PROBE"):
        pytest.skip("probe asked to skip")


def _probe(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["FAILLAB_SKIP_PROBE"] = "1"
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{HERE}::test_skip_probe"],
        cwd=HERE.parent.parent, env=env, capture_output=True, text=True)


def test_a_skip_fails_in_ci() -> None:
    proc = _probe("true")
    assert proc.returncode == 1, proc.stdout
    assert "skipped in CI" in proc.stdout
    assert "1 failed" in proc.stdout


@pytest.mark.parametrize("ci", [None, "false", "0"])
def test_a_skip_is_a_skip_on_a_developer_machine(ci: str | None) -> None:
    proc = _probe(ci)
    assert proc.returncode == 0, proc.stdout
    assert "1 skipped" in proc.stdout
