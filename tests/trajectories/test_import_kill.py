"""`kill -9` of a real `faillab import` at each stage: no process it started outlives it, the
workspace reads as it did before the import (the manifest write is the import's one commit),
and the next import cleans up and completes.

Each test starts the import in its own session (so every process it starts, fork server,
resource tracker and workers, is in its process group), waits for a stage it can see from
outside (workers parsing with nothing staged yet; staged parts on disk; the publish, after
its renames, reading the manifest), freezes the whole group with SIGSTOP so that the stage is
checked while nothing moves, then SIGKILLs the importing process alone and lets the others
run on, as after a real `kill -9`. Nothing in the product is there for the test: the stages
are read from /proc and the files (the publish is held by a named pipe put in the manifest's
place, see ``test_kill_while_publishing``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.support import REAL_TRAJECTORIES, require_shared
from trajectories.workspace import Workspace

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="reads /proc and uses inotify (Linux)")]

FAILLAB = str(Path(sys.executable).parent / "faillab")
#: The promise: nothing the import started is alive this long after it was killed.
SURVIVAL_LIMIT_S = 5.0
#: How long a stage may take to show up on a loaded machine before the test gives up.
STAGE_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- data


@pytest.fixture(scope="module")
def import_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two large files first (each worker parses one for a while before it stages anything),
    then many small ones (parts are staged while the workers still have files to parse, and
    the publish has hundreds of parts to rename).
    Real tau-bench records with distinct trial numbers, so every record is a new trajectory
    and no staged part is dropped as a duplicate."""
    real = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    records = [(path.stem, rec) for path in real for rec in json.loads(path.read_bytes())]
    folder = tmp_path_factory.mktemp("kill-import")
    files: list[Path] = []
    trial = 1000
    for big in range(2):
        chunk = []
        for _ in range(4):
            for _, rec in records:
                trial += 1
                chunk.append({**rec, "trial": trial})
        path = folder / f"{records[0][0]}-big{big}.json"
        path.write_text(json.dumps(chunk))
        files.append(path)
    for small in range(240):
        stem, rec = records[small % len(records)]
        chunk = []
        for _ in range(2):
            trial += 1
            chunk.append({**rec, "trial": trial})
        path = folder / f"{stem}-s{small:03d}.json"
        path.write_text(json.dumps(chunk))
        files.append(path)
    return files


@pytest.fixture(scope="module")
def base_file() -> Path:
    """What the workspace holds before the killed import (a real file, imported whole)."""
    real = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    return real[0]


@pytest.fixture(scope="module")
def complete_ids(import_files: list[Path], base_file: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], set[str]]:
    """The ids before the import and after it ran to the end (a reference workspace)."""
    ws = tmp_path_factory.mktemp("reference") / "ws"
    _run_import(ws, [base_file])
    before = _visible_ids(ws)
    _run_import(ws, import_files)
    after = _visible_ids(ws)
    assert before and after > before
    return before, after


def _run_import(ws: Path, files: list[Path]) -> None:
    done = subprocess.run([FAILLAB, "import", *map(str, files), "--workspace", str(ws)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def _visible_ids(ws: Path) -> set[str]:
    """The ids a reader sees (the DuckDB view the app and the CLI read)."""
    workspace = Workspace(ws)
    return {str(i) for i in workspace.query_df("SELECT id FROM trajectories")["id"]}


# --------------------------------------------------------------------------- processes


def _stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, process group, session, start time) of a live process, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def _all_pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _descendants(root: int) -> dict[int, int]:
    """Every live process below ``root`` (by parent links), with its start time."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is not None and stat[0] != "Z":
            children.setdefault(stat[1], []).append(pid)
            starts[pid] = stat[4]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def _survivors(root: int, known: dict[int, int]) -> list[str]:
    """Processes still alive (not zombies) that the killed import started: those seen below
    it before the kill (the same pid and start time: orphans are re-parented, so ancestry
    alone no longer finds them) and any process still in its process group or session."""
    alive = []
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is None or stat[0] == "Z" or pid == root:
            continue
        if known.get(pid) == stat[4] or root in (stat[2], stat[3]):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                cmd = b"?"
            alive.append(f"{pid} (parent {stat[1]}): {cmd.decode(errors='replace')[:120]}")
    return alive


def _workers(root: int) -> list[int]:
    """The import's pool workers: processes two levels down (children of the fork server)."""
    below = _descendants(root)
    direct = {pid for pid in below if (_stat(pid) or ("", 0))[1] == root}
    return [pid for pid in below if pid not in direct]


@contextmanager
def _frozen(pgid: int) -> Iterator[None]:
    os.killpg(pgid, signal.SIGSTOP)
    try:
        yield
    finally:
        with suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGCONT)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STAGE_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"the import never reached {what}")
        time.sleep(0.002)


# --------------------------------------------------------------------------- the scenario


@pytest.fixture()
def start(tmp_path: Path) -> Iterator[Callable[[Path, list[Path]], subprocess.Popen[bytes]]]:
    """Starts ``faillab import`` in a new session; whatever of it a failed test left running
    is killed at teardown (its process group, by id)."""
    started: list[subprocess.Popen[bytes]] = []

    def run(ws: Path, files: list[Path]) -> subprocess.Popen[bytes]:
        # Output goes to a file: a pipe nobody reads would block the survivors.
        with open(tmp_path / f"import-{len(started)}.log", "wb") as out:
            proc = subprocess.Popen(
                [FAILLAB, "import", *map(str, files), "--workspace", str(ws)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        return proc

    yield run
    for proc in started:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _kill_and_check(proc: subprocess.Popen[bytes], ws: Path, files: list[Path],
                    ids: tuple[set[str], set[str]], frozen_check: Callable[[], None],
                    after_kill: Callable[[], None] | None = None) -> None:
    """Freeze the import's group, check the stage, kill the importing process only, then:
    nothing it started survives, the workspace reads as before, and the next import cleans
    up and completes."""
    root = proc.pid
    with _frozen(root):
        frozen_check()
        known = _descendants(root)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if after_kill is not None:
        after_kill()
    deadline = time.monotonic() + SURVIVAL_LIMIT_S
    survivors = _survivors(root, known)
    while survivors and time.monotonic() < deadline:
        time.sleep(0.05)
        survivors = _survivors(root, known)
    if survivors:
        # Fail without leaving them running: they are this test's (same session or seen
        # below the import), killed by pid.
        for line in survivors:
            with suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not survivors, f"{len(survivors)} of {len(known)} survived the import: {survivors}"

    # Killed before its manifest was written, the import is not visible at all: the
    # manifest write is its one commit (which renames were done before it is chance).
    before, after = ids
    assert _visible_ids(ws) == before
    # The next import removes what the killed one staged and imports everything.
    _run_import(ws, files)
    assert _visible_ids(ws) == after
    parts = ws / "trajectories"
    assert not list(parts.glob(".part-*.tmp"))
    manifest = json.loads((parts / "manifest.json").read_text())
    # Every part on disk is listed (visible, or retired by the compaction after the import
    # and kept for its grace period): none is left over from the killed import.
    listed = set(manifest["parts"]) | set(manifest.get("retired", {}))
    assert {p.name for p in parts.glob("part-*.parquet")} == listed


def _workspace_with_base(tmp_path: Path, base_file: Path) -> Path:
    ws = tmp_path / "ws"
    _run_import(ws, [base_file])
    return ws


def test_kill_while_workers_parse(tmp_path: Path, import_files: list[Path], base_file: Path,
                                  complete_ids: tuple[set[str], set[str]],
                                  start: Callable[..., subprocess.Popen[bytes]]) -> None:
    ws = _workspace_with_base(tmp_path, base_file)
    parts = ws / "trajectories"
    proc = start(ws, import_files)
    _wait_for(lambda: bool(_workers(proc.pid)), "its workers")

    def parsing() -> None:
        assert _workers(proc.pid), "no worker was running"
        assert not list(parts.glob(".part-*.tmp")), "parts were staged already"

    _kill_and_check(proc, ws, import_files, complete_ids, parsing)


def test_kill_while_parts_are_staged(tmp_path: Path, import_files: list[Path],
                                     base_file: Path,
                                     complete_ids: tuple[set[str], set[str]],
                                     start: Callable[..., subprocess.Popen[bytes]]) -> None:
    ws = _workspace_with_base(tmp_path, base_file)
    parts = ws / "trajectories"
    proc = start(ws, import_files)
    _wait_for(lambda: len(list(parts.glob(".part-*.tmp"))) >= 3, "staged parts")

    def staging() -> None:
        assert _workers(proc.pid), "no worker was running"
        assert list(parts.glob(".part-*.tmp"))

    _kill_and_check(proc, ws, import_files, complete_ids, staging)


@pytest.mark.parametrize("fresh", [False, True], ids=["after-an-import", "fresh-workspace"])
def test_kill_while_publishing(tmp_path: Path, import_files: list[Path], base_file: Path,
                               complete_ids: tuple[set[str], set[str]], fresh: bool,
                               start: Callable[..., subprocess.Popen[bytes]]) -> None:
    """Killed with its parts renamed into place and the manifest that lists them not yet
    written: the one moment a half import could show. (On a workspace without a manifest
    yet, the first import's, every part file on disk was visible.)

    The publish takes milliseconds, less than this test may wait to be scheduled, so the
    moment is made to hold still: once the workers are on their last files, the manifest is
    swapped for a named pipe. The publish reads the manifest after its renames, and that read
    blocks on the pipe until the test has killed the import; the manifest is then put back
    as it was (or removed again, if there was none), so the workspace is what the import
    left."""
    before, after = complete_ids
    ids: tuple[set[str], set[str]]
    if fresh:
        ws = tmp_path / "ws"
        ids = (set(), after - before)
    else:
        ws = _workspace_with_base(tmp_path, base_file)
        ids = complete_ids
    parts = ws / "trajectories"
    manifest = parts / "manifest.json"
    proc = start(ws, import_files)
    _wait_for(lambda: len(list(parts.glob(".part-*.tmp"))) >= len(import_files) - 20,
              "its last files")
    saved = manifest.read_bytes() if manifest.exists() else None
    pipe = parts / ".manifest-pipe"
    os.mkfifo(pipe)
    os.replace(pipe, manifest)
    writer = -1
    try:
        # Opening the pipe's write end succeeds (without blocking) once the import opened
        # its read end: it is in the publish, and its read now waits for data.
        deadline = time.monotonic() + STAGE_TIMEOUT_S
        while writer < 0:
            try:
                writer = os.open(manifest, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                assert proc.poll() is None, "the import ended without reading its manifest"
                assert time.monotonic() < deadline, "the import never published"
                time.sleep(0.001)

        def publishing() -> None:
            renamed = {p.name for p in parts.glob("part-*.parquet")}
            if saved is not None:
                renamed -= set(json.loads(saved)["parts"])
            assert renamed, "nothing renamed into place yet"

        def put_back() -> None:
            if saved is None:
                manifest.unlink()
            else:
                (parts / ".manifest-back").write_bytes(saved)
                os.replace(parts / ".manifest-back", manifest)

        _kill_and_check(proc, ws, import_files, ids, publishing, after_kill=put_back)
    finally:
        if writer >= 0:
            os.close(writer)
