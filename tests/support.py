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
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from trajectories.model import Run, Step, StepKind, Task, Trajectory

if TYPE_CHECKING:
    from trajectories.workspace import ImportReport

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("FAILLAB_SHARED_DATA", REPO.parent / "shared" / "data"))
REAL_TRAJECTORIES = SHARED_DATA / "trajectories" / "ai612-student"
#: Real LM Studio exports with their rows of the benchmark CSV (human verdicts), and a
#: results table of final answers with gold and human verdicts (see ../shared/data/README.md).
LMSTUDIO_SAMPLE = SHARED_DATA / "trajectories" / "m3-lmstudio-sample"
CLAUDE_ANSWERS = SHARED_DATA / "trajectories" / "m3-claude-sonnet-4" / "EHRSQL_benchmark.csv"
EHRSQL_SQLITE = SHARED_DATA / "ehrsql-2024" / "mimic_iv.sqlite"
MIMIC_DEMO = SHARED_DATA / "mimic-iv-demo-2.2"


class ImportedWorkspace(NamedTuple):
    """A workspace folder built by one import, and that import's report."""

    root: Path
    report: ImportReport


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


# --------------------------------------------------------------------------- re-import tests
# An older importer: the real one with some records read differently (as when a release
# changes how a cut SQL result is read) under the previous schema key, so a workspace holds
# what an earlier release wrote.


def write_native_run(path: Path, n: int, *, run: str = "r1") -> Path:
    """``n`` native JSONL records of one run (tasks task-0 ...)."""
    import json

    lines = []
    for i in range(n):
        rec = make_trajectory(final_answer=52).model_dump(mode="json", exclude={"id"})
        rec["task"]["id"] = f"task-{i}"
        rec["run"]["name"] = run
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def older_importer(monkeypatch: pytest.MonkeyPatch, changed: set[int],
                   accept_bad: bool = False) -> None:
    """Make in-process imports read the records at positions ``changed`` differently
    (another final answer, so another id) under the previous schema key; ``accept_bad`` also
    takes the records the real importer rejects (as a copy of the last good one)."""
    import trajectories.import_workers as import_workers
    from trajectories.importers.detect import Parsed, iter_file

    def reading(path: Path, fmt: str = "auto", **kwargs: Any) -> Iterator[Parsed]:
        template: Trajectory | None = None
        for position, item in enumerate(iter_file(path, fmt, **kwargs)):
            traj = item.trajectory
            if traj is None and item.prepared is not None:
                traj = item.prepared.trajectory()
            if item.problem is not None:
                if not (accept_bad and template is not None):
                    yield item
                    continue
                traj = template.model_copy(update={"final_answer": f"bad {position}"})
            assert traj is not None
            template = traj
            if position in changed:
                traj = traj.model_copy(update={"final_answer": f"older reading {position}"})
            yield Parsed(item.location, traj.model_copy(update={"id": None}).with_id(), None,
                         item.raw)

    monkeypatch.setattr(import_workers, "iter_file", reading)
    monkeypatch.setattr(import_workers, "SCHEMA_KEY", import_workers.OLDER_SCHEMA_KEYS[-1])


def import_with_older_importer(ws: Any, files: list[Path], monkeypatch: pytest.MonkeyPatch,
                               changed: set[int], accept_bad: bool = False) -> None:
    with monkeypatch.context() as patch:
        older_importer(patch, changed, accept_bad)
        ws.import_files(files, workers=1)


def strip_provenance(ws: Any) -> None:
    """Rewrite every local part as a release before provenance wrote it (no such columns)."""
    import pyarrow.parquet as pq

    from trajectories.rows import PROVENANCE_COLUMNS

    for part in ws.part_files():
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(list(PROVENANCE_COLUMNS)), part)
    ws.parts.changed()


def stored_ids(ws: Any) -> list[str]:
    return sorted(r[0] for r in ws.connect().execute("SELECT id FROM parts").fetchall())


def ids_by_position(ws: Any, source_file: Path) -> list[str]:
    """The stored ids of a file's records, by record position (rows with provenance)."""
    rows = ws.connect().execute(
        "SELECT id FROM parts WHERE source_file = ? ORDER BY source_record",
        [str(source_file)]).fetchall()
    return [r[0] for r in rows]
