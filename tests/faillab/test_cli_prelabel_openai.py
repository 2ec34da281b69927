"""``faillab prelabel --labeler openai-compatible`` end to end on a copy of the demo workspace,
against the local fake chat-completions server (no network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from labeling.store import open_store
from opinions.prelabel.prompt import PROMPT_VERSION
from taxonomy import default_taxonomy
from tests.fake_openai import FakeOpenAI
from trajectories.workspace import Workspace

PROXIED_URL = "http://llm.example.com/v1"


@pytest.fixture
def ws_dir(demo_workspace: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    return root


def invoke(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    base: dict[str, str | None] = {
        "FAILLAB_DATABASE_URL": "", "FAILLAB_ALLOW_EXTERNAL_LLM": "",
        "FAILLAB_OPENAI_BASE_URL": "", "FAILLAB_OPENAI_MODEL": "", "FAILLAB_OPENAI_API_KEY": "",
        "FAILLAB_OPENAI_OWN_HOSTS": "", "FAILLAB_OPENAI_PRICE_PER_MTOK": "",
        "FAILLAB_OPENAI_RESPONSE_FORMAT": "",
    }
    result = CliRunner().invoke(main, list(args), env={**base, **(env or {})},
                                catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def failures(ws_dir: Path) -> int:
    return len(Workspace(ws_dir).list(needing_a_person=True))


def server_env(url: str, **extra: str) -> dict[str, str | None]:
    return {"FAILLAB_OPENAI_BASE_URL": url, "FAILLAB_OPENAI_MODEL": "qwen-local",
            "FAILLAB_OPENAI_API_KEY": "local-key", **extra}


def test_local_server_labels_everything_then_answers_from_the_cache(ws_dir: Path) -> None:
    n = failures(ws_dir)
    with FakeOpenAI() as fake:
        env = server_env(fake.base_url)
        args = ("prelabel", "--labeler", "openai-compatible", "--json",
                "--workspace", str(ws_dir))
        # A local address: no --yes-send-data needed, and the notice says where data goes.
        code, out, err = invoke(*args, env=env)
        assert code == 0, err
        assert json.loads(out) == {"labelled": n, "cached": 0, "failed": 0, "calls": n,
                                   "structured_output": "json_schema"}
        assert "privacy:" in err and fake.base_url in err and "local or private" in err
        assert fake.request_count == n
        assert {r.model for r in fake.requests} == {"qwen-local"}
        assert {r.headers["authorization"] for r in fake.requests} == {"Bearer local-key"}

        code, out, _ = invoke(*args, env=env)
        assert code == 0
        assert json.loads(out) == {"labelled": 0, "cached": n, "failed": 0, "calls": 0,
                                   "structured_output": None}
        assert fake.request_count == n  # the fake saw no second request

    store = open_store(Workspace(ws_dir).default_annotations_url)
    try:
        runs = store.prelabels.latest_runs(5)
        cached = store.prelabels.get_many(default_taxonomy().version, PROMPT_VERSION,
                                          "qwen-local")
    finally:
        store.close()
    assert {(r.labeller, r.model) for r in runs} == {("openai-compatible", "qwen-local")}
    paid = [r for r in runs if r.calls == n]
    assert paid and paid[0].tokens > 0
    assert len(cached) == n and {rec.result.labeller for rec in cached.values() if rec.result} \
        == {"openai-compatible"}


def test_text_report_names_the_fallback_tokens_and_cost(ws_dir: Path) -> None:
    with FakeOpenAI(formats=("json_object",)) as fake:
        env = server_env(fake.base_url, FAILLAB_OPENAI_PRICE_PER_MTOK="1.0,2.0",
                         FAILLAB_OPENAI_MODEL="")
        code, out, err = invoke("prelabel", "--labeler", "openai-compatible", "--model",
                                "llama-3-8b", "--limit", "3", "--concurrency", "2",
                                "--workspace", str(ws_dir), env=env)
        assert code == 0, err
        assert {r.model for r in fake.requests} == {"llama-3-8b"}  # --model wins
    assert "labelled 3, cached 0, failed 0; 3 API calls" in out
    assert "structured output: json_object" in out
    assert "the server refused json_schema first" in out
    cost = float(out.split("estimated cost $", 1)[1].split()[0])
    assert cost > 0  # the configured prices were applied


def test_remote_server_needs_the_acknowledgement(ws_dir: Path) -> None:
    with FakeOpenAI() as fake:
        # The fake is the HTTP proxy for an address that is not local: a request that got out
        # would arrive there.
        env = {**server_env(PROXIED_URL), "HTTP_PROXY": fake.proxy_url, "http_proxy": None,
               "NO_PROXY": None, "no_proxy": None, "ALL_PROXY": None, "all_proxy": None}
        args = ("prelabel", "--labeler", "openai-compatible", "--limit", "2", "--json",
                "--workspace", str(ws_dir))
        code, out, err = invoke(*args, env=env)
        assert code == 1 and out == ""
        assert "NOT a local or private address" in err and "plain http" in err
        assert err.strip().splitlines()[-1].startswith(
            "error: refusing to send trajectories to the OpenAI-compatible server at "
            "llm.example.com")
        assert fake.request_count == 0

        code, out, err = invoke(*args, "--yes-send-data", env=env)
        assert code == 0, err
        assert json.loads(out)["labelled"] == 2
        assert {r.host for r in fake.requests} == {"llm.example.com"}

        # Listing the host as the team's own lifts the need for an acknowledgement.
        code, out, err = invoke(*args, env={**env, "FAILLAB_OPENAI_OWN_HOSTS": "llm.example.com"})
        assert code == 0, err


@pytest.mark.parametrize(("env", "message"), [
    ({}, "error: no OpenAI-compatible server: set FAILLAB_OPENAI_BASE_URL"),
    ({"FAILLAB_OPENAI_BASE_URL": "http://localhost:8000/v1"},
     "error: no model for the OpenAI-compatible server"),
])
def test_missing_settings_are_one_line(ws_dir: Path, env: dict[str, str | None],
                                       message: str) -> None:
    code, out, err = invoke("prelabel", "--labeler", "openai-compatible", "--workspace",
                            str(ws_dir), env=env)
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [err.strip().splitlines()[-1]]
    assert err.strip().startswith(message)


def test_batch_is_gemini_only(ws_dir: Path) -> None:
    with FakeOpenAI() as fake:
        code, _, err = invoke("prelabel", "--labeler", "openai-compatible", "--batch",
                              "--workspace", str(ws_dir), env=server_env(fake.base_url))
        assert fake.request_count == 0
    assert code == 1 and "--labeler gemini" in err


def test_the_app_worker_runs_it_and_logs_the_mode(ws_dir: Path) -> None:
    from faillab.cli.prelabel import prelabel_worker
    from opinions.prelabel.options import PrelabelOptions

    # What the page launches parses back into the same options (the server comes from the
    # worker's environment, the key never from its command line).
    given = PrelabelOptions(labeller="openai-compatible", model="qwen-local", limit=2)
    assert "--labeler" in given.to_argv() and "local-key" not in given.to_argv()
    ctx = prelabel_worker.make_context("prelabel-worker", given.to_argv())
    assert PrelabelOptions.from_params(ctx.params) == given
    with FakeOpenAI(formats=("text",)) as fake:
        result = CliRunner().invoke(main, ["prelabel-worker", *given.to_argv(),
                                           "--workspace", str(ws_dir)],
                                    env={"FAILLAB_DATABASE_URL": "",
                                         **server_env(fake.base_url)})
        assert fake.request_count == 2 + 2  # two formats refused once, then two answers
    assert result.exit_code == 0, result.stderr
    assert "labelled 2" in result.stderr and "structured output: text" in result.stderr
