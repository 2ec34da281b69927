"""Pre-labelling service: workspace failures -> labeller -> store (SQLite here), run records,
resumption and routing. Gemini goes through the real google-genai SDK to the local fake server."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from labeling.store import Store, open_store
from llm.errors import ConsentRequiredError
from opinions.prelabel.consent import require_consent
from opinions.prelabel.launch import WORKER_COMMAND, worker_command
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.routing import prelabel_confidences
from opinions.prelabel.run_errors import PrelabelRunAborted, PrelabelServiceError
from opinions.prelabel.service import failed_trajectories, run_prelabelling
from taxonomy import default_taxonomy
from tests.fake_gemini import FakeGemini
from trajectories.workspace import Workspace


@pytest.fixture
def ws(demo_workspace: Path, tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    return Workspace(root)


@pytest.fixture
def store(ws: Workspace) -> Iterator[Store]:
    s = open_store(ws.default_annotations_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        monkeypatch.setenv("GEMINI_API_KEY", "dummy-key")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
        monkeypatch.delenv("FAILLAB_ALLOW_EXTERNAL_LLM", raising=False)
        yield server


def n_failures(ws: Workspace) -> int:
    return len(ws.list(needing_a_person=True))


GEMINI = PrelabelOptions(labeller="gemini", model="gemini-2.5-flash", vertex=False,
                         concurrency=8, allow_external=True)


def test_failed_trajectories_are_exactly_the_workspace_failures(ws: Workspace) -> None:
    ids = [t.id for t in failed_trajectories(ws)]
    assert len(ids) == len(set(ids))
    assert set(ids) == {r["id"] for r in ws.list(needing_a_person=True)}


def test_heuristic_labels_every_failure_then_caches(ws: Workspace, store: Store) -> None:
    n = n_failures(ws)
    assert n > 0
    first = run_prelabelling(ws, store, PrelabelOptions(labeller="heuristic"))
    s = first.stats
    assert (s.labelled, s.cached, s.failed, s.calls) == (n, 0, 0, 0)
    run = store.prelabels.get_run(first.run_id)
    assert run is not None and run.status == "done" and run.finished_at is not None
    assert (run.total, run.done, run.labelled, run.calls, run.tokens) == (n, n, n, 0, 0)
    assert run.labeller == "heuristic"

    second = run_prelabelling(ws, store, PrelabelOptions(labeller="heuristic"))
    assert (second.stats.labelled, second.stats.cached, second.stats.calls) == (0, n, 0)
    run2 = store.prelabels.get_run(second.run_id)
    assert run2 is not None and (run2.cached, run2.done, run2.status) == (n, n, "done")
    # The taxonomy behind the labels is kept.
    assert store.taxonomies.get(default_taxonomy().version) is not None


def test_gemini_through_fake_server_calls_once_per_failure(
    ws: Workspace, store: Store, fake: FakeGemini
) -> None:
    n = n_failures(ws)
    first = run_prelabelling(ws, store, GEMINI)
    assert (first.stats.labelled, first.stats.failed, first.stats.calls) == (n, 0, n)
    assert fake.request_count == n
    run = store.prelabels.get_run(first.run_id)
    assert run is not None and run.status == "done"
    assert run.labeller == "gemini" and run.model == "gemini-2.5-flash"
    assert run.calls == n and run.labelled == n
    # Tokens and cost are recorded with the run.
    assert run.tokens == first.stats.input_tokens + first.stats.output_tokens > 0
    assert run.estimated_cost == pytest.approx(first.stats.estimated_cost_usd, rel=1e-6)
    assert run.estimated_cost > 0

    second = run_prelabelling(ws, store, GEMINI)
    assert (second.stats.calls, second.stats.cached, second.stats.labelled) == (0, n, 0)
    assert fake.request_count == n


def test_limited_run_resumes_without_duplicate_calls(
    ws: Workspace, store: Store, fake: FakeGemini
) -> None:
    n = n_failures(ws)
    part = run_prelabelling(ws, store, PrelabelOptions(**{**GEMINI.__dict__, "limit": 10}))
    assert (part.stats.labelled, part.stats.calls) == (10, 10)
    rest = run_prelabelling(ws, store, GEMINI)
    assert (rest.stats.cached, rest.stats.labelled, rest.stats.calls) == (10, n - 10, n - 10)
    sent = [r.trajectory_id for r in fake.requests]
    assert len(sent) == len(set(sent)) == n


@pytest.mark.slow
def test_killed_worker_resumes_without_duplicate_calls(
    ws: Workspace, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = n_failures(ws)
    # Slow answers and one request at a time, so the worker is surely midway when killed.
    with FakeGemini(latency_s=0.05) as fake:
        env = {**os.environ, "GEMINI_API_KEY": "dummy-key",
               "GOOGLE_GEMINI_BASE_URL": fake.base_url, "FAILLAB_WORKSPACE": str(ws.root),
               "FAILLAB_DATABASE_URL": ""}
        env.pop("GOOGLE_CLOUD_PROJECT", None)
        opts = PrelabelOptions(**{**GEMINI.__dict__, "concurrency": 1})
        run_id = store.prelabels.start_run("gemini", "gemini-2.5-flash")
        proc = subprocess.Popen(worker_command(opts, run_id=run_id, workspace_root=ws.root),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while fake.request_count < 15 and time.monotonic() < deadline:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
            assert fake.request_count >= 15
            os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up
        finally:
            proc.wait(timeout=30)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        first_requests = fake.request_count
        saved = sum(1 for rec in prelabel_confidences(
            store, [r["id"] for r in ws.list(needing_a_person=True)], opts, default_taxonomy()
        ).values() if rec is not None and rec.ok)
        assert 0 < saved < n
        # At most the requests in flight at the kill were paid for and not saved.
        assert first_requests - saved <= 1

        monkeypatch.setenv("GEMINI_API_KEY", "dummy-key")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)
        resumed = run_prelabelling(ws, store, GEMINI)
        assert resumed.stats.cached == saved
        assert resumed.stats.labelled == n - saved
        assert resumed.stats.calls == n - saved
        ids = [r.trajectory_id for r in fake.requests]
        # Only an item whose answer was in flight at the kill may have been asked twice.
        assert len(ids) - len(set(ids)) <= first_requests - saved
        assert len(set(ids)) == n


def test_abort_marks_run_failed_and_keeps_completed(
    ws: Workspace, store: Store, fake: FakeGemini
) -> None:
    fake.push(*(["ok"] * 5))
    fake.default = fake.default.__class__("401")
    opts = PrelabelOptions(**{**GEMINI.__dict__, "concurrency": 1})
    with pytest.raises(PrelabelRunAborted) as info:
        run_prelabelling(ws, store, opts)
    assert info.value.stats.labelled == 5
    runs = store.prelabels.latest_runs(1)
    assert runs[0].status == "failed" and runs[0].labelled == 5
    assert runs[0].finished_at is not None


def test_gemini_needs_acknowledgement(ws: Workspace, store: Store, fake: FakeGemini) -> None:
    opts = PrelabelOptions(**{**GEMINI.__dict__, "allow_external": False})
    with pytest.raises(ConsentRequiredError, match="--yes-send-data"):
        run_prelabelling(ws, store, opts, env={})
    assert fake.request_count == 0
    # Vertex AI is not exempt: zero retention there depends on project settings.
    with pytest.raises(ConsentRequiredError, match="Vertex AI"):
        require_consent(PrelabelOptions(labeller="gemini", vertex=True), env={})
    require_consent(PrelabelOptions(labeller="gemini"), env={"FAILLAB_ALLOW_EXTERNAL_LLM": "1"})
    require_consent(PrelabelOptions(labeller="heuristic"), env={})  # nothing leaves the machine
    # A refused run that the app had already recorded is closed, not left "running".
    run_id = store.prelabels.start_run("gemini", "gemini-2.5-flash")
    with pytest.raises(ConsentRequiredError):
        run_prelabelling(ws, store, opts, run_id=run_id, env={})
    run = store.prelabels.get_run(run_id)
    assert run is not None and run.status == "failed"


def test_bad_options_are_user_errors() -> None:
    with pytest.raises(PrelabelServiceError):
        PrelabelOptions(labeller="oracle")
    with pytest.raises(PrelabelServiceError):
        PrelabelOptions(concurrency=0)
    with pytest.raises(PrelabelServiceError):
        PrelabelOptions(limit=0)


def test_worker_entry_point_runs_heuristic(ws: Workspace, store: Store) -> None:
    env = {**os.environ, "FAILLAB_DATABASE_URL": ""}
    run_id = store.prelabels.start_run("heuristic", "heuristic")
    done = subprocess.run(
        [sys.executable, "-m", "faillab.cli", WORKER_COMMAND, "--run-id", str(run_id),
         "--workspace", str(ws.root), "--labeler", "heuristic", "--limit", "7"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    run = store.prelabels.get_run(run_id)
    assert run is not None and (run.status, run.labelled) == ("done", 7)
    # The worker enforces the privacy interlock itself.
    env.pop("FAILLAB_ALLOW_EXTERNAL_LLM", None)
    refused = subprocess.run(
        [sys.executable, "-m", "faillab.cli", WORKER_COMMAND, "--workspace", str(ws.root),
         "--labeler", "gemini", "--no-vertex"],
        env={**env, "GEMINI_API_KEY": "dummy"}, capture_output=True, text=True, timeout=120,
    )
    assert refused.returncode == 1 and "--yes-send-data" in refused.stderr
