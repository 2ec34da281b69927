"""``faillab prelabel``: JSON output, the privacy interlock and the aborted-run path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from labeling.store import open_store
from tests.fake_gemini import FakeGemini
from trajectories.workspace import Workspace


@pytest.fixture
def ws_dir(demo_workspace: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    return root


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    base = {"FAILLAB_DATABASE_URL": "", "FAILLAB_ALLOW_EXTERNAL_LLM": "",
            "GOOGLE_CLOUD_PROJECT": "", "GOOGLE_API_KEY": ""}
    result = CliRunner().invoke(main, list(args), env={**base, **(env or {})},
                                catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def failures(ws_dir: Path) -> int:
    return len(Workspace(ws_dir).list(needing_a_person=True))


def test_heuristic_json(ws_dir: Path) -> None:
    n = failures(ws_dir)
    code, out, _ = invoke("prelabel", "--labeler", "heuristic", "--json",
                          "--workspace", str(ws_dir))
    assert code == 0
    assert json.loads(out) == {"labelled": n, "cached": 0, "failed": 0, "calls": 0}
    code, out, _ = invoke("prelabel", "--labeler", "heuristic", "--json",
                          "--workspace", str(ws_dir))
    assert json.loads(out) == {"labelled": 0, "cached": n, "failed": 0, "calls": 0}


def test_heuristic_text_output_and_limit(ws_dir: Path) -> None:
    code, out, _ = invoke("prelabel", "--workspace", str(ws_dir), "--limit", "5")
    assert code == 0
    assert "labelled 5, cached 0, failed 0" in out
    assert "estimated cost $0.0000" in out


def test_gemini_interlock_and_fake_server(ws_dir: Path) -> None:
    n = failures(ws_dir)
    with FakeGemini() as fake:
        env = {"GEMINI_API_KEY": "dummy-key", "GOOGLE_GEMINI_BASE_URL": fake.base_url}
        args = ("prelabel", "--labeler", "gemini", "--model", "gemini-2.5-flash", "--json",
                "--workspace", str(ws_dir))
        # Without an acknowledgement: the notice, a one-line refusal, nothing sent.
        code, out, err = invoke(*args, env=env)
        assert code == 1 and out == ""
        assert "PhysioNet" in err and "NOT zero-retention" in err
        assert err.strip().splitlines()[-1].startswith("error: refusing to send")
        assert fake.request_count == 0

        code, out, err = invoke(*args, "--yes-send-data", env=env)
        assert code == 0, err
        assert json.loads(out) == {"labelled": n, "cached": 0, "failed": 0, "calls": n}
        assert "PhysioNet" in err  # the notice is shown even when acknowledged
        assert fake.request_count == n

        # The environment variable acknowledges too; everything is cached now.
        code, out, _ = invoke(*args, env={**env, "FAILLAB_ALLOW_EXTERNAL_LLM": "1"})
        assert code == 0
        assert json.loads(out) == {"labelled": 0, "cached": n, "failed": 0, "calls": 0}
        assert fake.request_count == n

    # Tokens and cost are recorded with the run.
    store = open_store(Workspace(ws_dir).default_annotations_url)
    try:
        runs = store.prelabels.latest_runs(5)
    finally:
        store.close()
    paid = [r for r in runs if r.calls == n]
    assert paid and paid[0].tokens > 0 and paid[0].estimated_cost > 0


def test_gemini_text_output_prints_tokens_and_cost(ws_dir: Path) -> None:
    with FakeGemini() as fake:
        env = {"GEMINI_API_KEY": "dummy-key", "GOOGLE_GEMINI_BASE_URL": fake.base_url}
        code, out, _ = invoke("prelabel", "--labeler", "gemini", "--model", "gemini-2.5-pro",
                              "--limit", "3", "--yes-send-data", "--workspace", str(ws_dir),
                              env=env)
    assert code == 0
    assert "labelled 3" in out and "3 API calls" in out
    assert "tokens:" in out and "estimated cost $" in out


def test_auth_failure_aborts_with_one_line(ws_dir: Path) -> None:
    with FakeGemini(script=["ok", "ok"], default="401") as fake:
        env = {"GEMINI_API_KEY": "dummy-key", "GOOGLE_GEMINI_BASE_URL": fake.base_url}
        code, out, err = invoke("prelabel", "--labeler", "gemini", "--concurrency", "1",
                                "--yes-send-data", "--json", "--workspace", str(ws_dir),
                                env=env)
        assert code == 1 and out == ""
        last = err.strip().splitlines()[-1]
        assert last.startswith("error: pre-labelling stopped") and "API key" in last
        assert "Traceback" not in err
        # Completed items were kept: a second run does not pay for them again.
        before = fake.request_count
        fake.default = fake.default.__class__("ok")
        code, out, _ = invoke("prelabel", "--labeler", "gemini", "--concurrency", "1",
                              "--yes-send-data", "--json", "--workspace", str(ws_dir),
                              env=env)
        assert code == 0
        result = json.loads(out)
        assert result["cached"] == 2
        assert result["calls"] == failures(ws_dir) - 2
        assert fake.request_count == before + result["calls"]


def test_bad_taxonomy_and_missing_key_are_one_line(ws_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "tax.json"
    bad.write_text("{}")
    code, out, err = invoke("prelabel", "--taxonomy", str(bad), "--workspace", str(ws_dir))
    assert code == 1 and len(err.strip().splitlines()) == 1 and err.startswith("error:")
    code, out, err = invoke("prelabel", "--labeler", "gemini", "--yes-send-data", "--json",
                            "--workspace", str(ws_dir), env={"GEMINI_API_KEY": ""})
    assert code == 1 and out == ""
    assert err.strip().splitlines()[-1].startswith("error: No Gemini API key")


def test_options_round_trip_through_the_worker_flags() -> None:
    # The argv a launched worker gets parses back, through the hidden command's click options
    # (built from the same definition), into exactly the options that produced it.
    from faillab.cli.prelabel import prelabel, prelabel_worker
    from opinions.prelabel.options import OPTIONS, PrelabelOptions

    given = PrelabelOptions(labeller="gemini", model="gemini-2.5-flash", concurrency=3, limit=9,
                            taxonomy_path=Path("tax.json"), vertex=False, project="p",
                            location="europe-west4", allow_external=True)
    ctx = prelabel_worker.make_context("prelabel-worker", given.to_argv())
    assert PrelabelOptions.from_params(ctx.params) == given
    assert PrelabelOptions.from_params(
        prelabel_worker.make_context("prelabel-worker", []).params) == PrelabelOptions()
    visible = {p.name for p in prelabel.params}
    hidden = {p.name for p in prelabel_worker.params}
    assert {s.field for s in OPTIONS} <= visible & hidden


def test_batch_shows_cost_first_then_submits_and_collects(ws_dir: Path) -> None:
    n = failures(ws_dir)
    with FakeGemini(batch_polls=1) as fake:
        env = {"GEMINI_API_KEY": "dummy-key", "GOOGLE_GEMINI_BASE_URL": fake.base_url}
        args = ("prelabel", "--labeler", "gemini", "--model", "gemini-2.5-flash", "--batch",
                "--json", "--workspace", str(ws_dir))
        # Without an acknowledgement: the notice and the estimate, then a refusal; nothing sent.
        code, out, err = invoke(*args, env=env)
        assert code == 1 and out == ""
        assert "PhysioNet" in err and f"batch: {n} trajectories to submit" in err
        assert "estimated cost $" in err
        assert err.strip().splitlines()[-1].startswith("error: refusing to send")
        assert fake.batch_calls == []

        code, out, err = invoke(*args, "--yes-send-data", env=env)
        assert code == 0, err
        submitted = json.loads(out)
        assert (submitted["submitted_jobs"], submitted["running_jobs"]) == (1, 1)
        assert submitted["to_submit"] == n and submitted["labelled"] == 0

        # --status shows the job waiting to be collected and sends nothing.
        code, out, err = invoke("prelabel", "--status", "--json", "--workspace", str(ws_dir),
                                env=env)
        assert code == 0, err
        status = json.loads(out)
        assert status["batch"]["model"] == "gemini-2.5-flash"
        assert [j["items"] for j in status["batch"]["open_jobs"]] == [n]
        code, out, _ = invoke("prelabel", "--status", "--workspace", str(ws_dir), env=env)
        assert "1 job(s) to collect" in out and f"{n} items" in out
        assert fake.batch_calls.count("create") == 1 and fake.request_count == 0

        code, out, err = invoke(*args, env=env)  # collecting sends nothing: no consent needed
        assert code == 0, err
        collected = json.loads(out)
        assert (collected["collected_jobs"], collected["labelled"]) == (1, n)

        # The interactive command finds everything in the cache.
        code, out, _ = invoke("prelabel", "--labeler", "gemini", "--model", "gemini-2.5-flash",
                              "--json", "--yes-send-data", "--workspace", str(ws_dir), env=env)
        assert json.loads(out) == {"labelled": 0, "cached": n, "failed": 0, "calls": 0}
        assert fake.request_count == 0 and fake.batch_calls.count("create") == 1


def test_batch_needs_gemini_and_wait_needs_batch(ws_dir: Path) -> None:
    code, _, err = invoke("prelabel", "--batch", "--workspace", str(ws_dir))
    assert code == 1 and "--labeler gemini" in err
    code, _, err = invoke("prelabel", "--wait", "--workspace", str(ws_dir))
    assert code == 1 and "--wait only applies to --batch" in err



def test_status_lists_runs_newest_first_and_sends_nothing(ws_dir: Path) -> None:
    code, out, _ = invoke("prelabel", "--status", "--workspace", str(ws_dir))
    assert code == 0 and out.strip() == "no pre-label runs yet"
    n = failures(ws_dir)
    invoke("prelabel", "--labeler", "heuristic", "--limit", "5", "--workspace", str(ws_dir))
    invoke("prelabel", "--labeler", "heuristic", "--workspace", str(ws_dir))
    code, out, err = invoke("prelabel", "--status", "--json", "--workspace", str(ws_dir))
    assert code == 0, err
    runs = json.loads(out)["runs"]
    assert [r["status"] for r in runs] == ["done", "done"] and runs[0]["id"] > runs[1]["id"]
    assert (runs[1]["labelled"], runs[0]["labelled"] + runs[0]["cached"]) == (5, n)
    assert json.loads(out)["batch"] is None
    code, out, _ = invoke("prelabel", "--status", "--workspace", str(ws_dir))
    lines = out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"run {runs[0]['id']}  done")
    assert f"{n}/{n} done" in lines[0]
