"""Helpers shared by test modules: paths to the shared real data, small valid trajectories and a
test taxonomy. Test modules import them from here (conftest.py holds fixtures and hooks only,
and is never imported by a test module)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from trajectories.model import Run, Step, StepKind, Task, Trajectory

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("FAILLAB_SHARED_DATA", REPO.parent / "shared" / "data"))
REAL_TRAJECTORIES = SHARED_DATA / "trajectories" / "ai612-student"
EHRSQL_SQLITE = SHARED_DATA / "ehrsql-2024" / "mimic_iv.sqlite"
MIMIC_DEMO = SHARED_DATA / "mimic-iv-demo-2.2"


def in_ci() -> bool:
    """CI sets CI=true; "0", "false" and "no" mean a developer run (one rule for every conftest)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_shared(path: Path) -> Path:
    """The shared real data is present on these machines and in CI: its absence is an error
    there, and a clear skip only on a developer machine without it."""
    if not path.exists():
        if in_ci():
            pytest.fail(f"shared data missing in CI: {path}")
        pytest.skip(f"shared data not present: {path}")
    return path


def make_trajectory(**overrides: Any) -> Trajectory:
    """A small, valid native trajectory; keyword arguments replace top-level parts."""
    base: dict[str, Any] = {
        "task": Task(id="t1", question="How many patients are female?", intent="Demographics",
                     scope="population", template_id="tpl-1",
                     reference_sql="SELECT count(*) FROM patients WHERE gender = 'F'",
                     ground_truth=[[52]], answer_format="a single number", split="test"),
        "run": Run(name="run-a", model="model-a", temperature=0.0, rollout=0),
        "steps": [
            Step(kind=StepKind.MESSAGE, role="user", content="How many patients are female?"),
            Step(kind=StepKind.SQL, code="SELECT count(*) FROM patients WHERE gender = 'F'",
                 observation="[(52,)]"),
            Step(kind=StepKind.MESSAGE, role="assistant", content="52"),
        ],
        "final_answer": 52,
        "outcome": None,
    }
    base.update(overrides)
    return Trajectory(**base)


# Category keys of the small test taxonomy that store tests label with (the store refuses any
# category that is not a key of the label's taxonomy version).
TEST_CATEGORY_KEYS = (
    "a", "b", "c", "wrong_table", "bad_join", "other",
    "semantic_misunderstanding", "sql_logic_error", "stuck_in_loop", "answer_format_error",
)
TEST_TAXONOMY_VERSIONS = ("v", "v1", "v-other", "other")


def save_test_taxonomy(store: Any, versions: tuple[str, ...] = TEST_TAXONOMY_VERSIONS,
                       keys: tuple[str, ...] = TEST_CATEGORY_KEYS) -> None:
    """Keep a small test taxonomy in `store` under each of `versions`."""
    snapshot = {
        "name": "test_taxonomy", "version": "1",
        "categories": [{"key": k, "name": f"Test {k}", "definition": f"test category {k}"}
                       for k in keys],
    }
    for version in versions:
        store.taxonomies.save(version, "test_taxonomy", snapshot)


POSTGRES_URL = os.environ.get(
    "FAILLAB_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """URL of a throwaway database on the shared PostgreSQL server, dropped afterwards.

    PostgreSQL runs on these machines and in CI, so there its absence fails the test; on a
    developer machine without it the test is skipped with the reason."""
    from sqlalchemy import create_engine, make_url, text
    from sqlalchemy.exc import OperationalError

    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        conn = admin.connect()
    except OperationalError as exc:
        admin.dispose()
        message = (f"PostgreSQL is unreachable at {POSTGRES_URL} ({exc.orig}). "
                   "Start it or set FAILLAB_TEST_POSTGRES_URL.")
        if in_ci():
            pytest.fail(f"CI=true requires PostgreSQL: {message}", pytrace=False)
        pytest.skip(message)
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.close()
        admin.dispose()


def free_port_in(ports: range, taken: Iterable[int] = ()) -> int:
    """A loopback port of ``ports`` nobody listens on (tests keep to their own range)."""
    skip = set(taken)
    for port in ports:
        if port in skip:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


def wait_for_health(url: str, proc: subprocess.Popen[bytes], log: Path, seconds: float) -> None:
    """Wait until the Streamlit server at ``url`` answers its health check; fail with the end of
    its log when it exits or stays silent."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server {url} exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"server {url} did not answer within {seconds:.0f} s")
