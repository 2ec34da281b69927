"""The registry of LLM backends: each backend's facts, its connection from the settings, where
its requests go, and that nothing else names a backend (no network)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from faillab.cli.verdicts import judge_cmd
from faillab_core.settings import Settings
from llm import (
    Connection,
    LLMConfigError,
    LLMServiceError,
    OpenAIEndpoint,
    backend,
    backend_names,
    backends,
    is_backend,
)
from llm.backends import GeminiBackend, register
from llm.gemini import GeminiJsonClient
from llm.openai_compat import OpenAICompatClient
from opinions.prelabel.options import PrelabelOptions, labeller_names, option_spec
from tests.support import REPO

LOCAL = "http://127.0.0.1:8000/v1"


def test_the_registry_names_every_backend_once() -> None:
    assert backend_names() == ("gemini", "openai-compatible")
    assert [b.name for b in backends()] == list(backend_names())
    assert all(is_backend(n) for n in backend_names()) and not is_backend("heuristic")
    with pytest.raises(LLMConfigError, match="unknown LLM backend 'nope'; choose one of gemini"):
        backend("nope")
    with pytest.raises(ValueError, match="new name"):
        register(GeminiBackend())


def test_the_faces_offer_the_registrys_names() -> None:
    assert labeller_names() == ("heuristic", *backend_names())
    assert option_spec("labeller").choices == labeller_names()
    llm_option = next(p for p in judge_cmd.params if p.name == "llm_backend")
    assert tuple(llm_option.type.choices) == backend_names()  # type: ignore[attr-defined]
    with pytest.raises(LLMServiceError, match="unknown labeller"):
        PrelabelOptions(labeller="gpt")


def test_gemini_connects_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    settings = Settings.from_env({"FAILLAB_GEMINI_MODEL": "gemini-2.5-flash",
                                  "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
                                  "FAILLAB_GEMINI_TIMEOUT": "7s"})
    gemini = backend("gemini")
    conn = gemini.connect(settings)
    assert conn == Connection("gemini", model="gemini-2.5-flash", base_url="http://127.0.0.1:9",
                              timeout_s=7.0)
    dest = gemini.destination(conn)
    assert dest.service == "the Gemini Developer API" and not dest.own_machines
    assert gemini.prices(conn) is None  # the price table knows Gemini's models
    client = gemini.client(conn)
    assert isinstance(client, GeminiJsonClient) and client.timeout_s == 7.0
    # Vertex AI: the Developer API's address override does not follow it.
    vertex = gemini.connect(settings, vertex=True, project="p")
    assert vertex.vertex and vertex.base_url is None and vertex.project == "p"
    assert gemini.destination(vertex).service == "Vertex AI"
    assert (gemini.batch, gemini.has_vertex, gemini.chooses_format) == (True, True, False)


def test_an_openai_compatible_server_connects_from_the_settings() -> None:
    settings = Settings.from_env({"FAILLAB_OPENAI_BASE_URL": LOCAL, "FAILLAB_OPENAI_MODEL": "m",
                                  "FAILLAB_OPENAI_PRICE_PER_MTOK": "0.1,0.2",
                                  "FAILLAB_OPENAI_TIMEOUT": "9s"})
    server = backend("openai-compatible")
    conn = server.connect(settings)
    assert conn.model == "m" and conn.endpoint is not None and conn.timeout_s == 9.0
    assert server.destination(conn).own_machines  # loopback: no acknowledgement needed
    assert server.prices(conn) == (0.1, 0.2)
    assert server.server(conn) == f"`{LOCAL}` (FAILLAB_OPENAI_BASE_URL)"
    client = server.client(conn)
    assert isinstance(client, OpenAICompatClient) and client.endpoint.timeout_s == 9.0
    remote = Connection("openai-compatible", model="m",
                        endpoint=OpenAIEndpoint("https://llm.example.com/v1"))
    assert not server.destination(remote).own_machines
    assert (server.batch, server.has_vertex, server.chooses_format) == (False, False, True)


@pytest.mark.parametrize(("env", "message"), [
    ({}, "FAILLAB_OPENAI_BASE_URL"),
    ({"FAILLAB_OPENAI_BASE_URL": LOCAL}, "FAILLAB_OPENAI_MODEL"),
    ({"FAILLAB_OPENAI_BASE_URL": "http://10.0.0.1%2f.evil.com/v1"}, "percent signs"),
])
def test_what_is_missing_is_one_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(LLMConfigError, match=message):
        backend("openai-compatible").connect(Settings.from_env(env))


#: A backend's name written as a string where it is compared or chosen: the registry
#: (llm/backends.py, llm/names.py) is the one place that may spell them.
_NAMED = re.compile(
    r"""(==|!=|\bin\b\s*[(\[{]|Choice\(\[)[^\n]*["'](gemini|openai-compatible)["']""")


def test_no_code_compares_backend_names() -> None:
    found = []
    for package in ("llm", "opinions", "app", "faillab", "analysis", "labeling", "trajectories"):
        for path in sorted((REPO / package).rglob("*.py")):
            if path.is_relative_to(REPO / "faillab" / "app"):
                continue  # the link to app/, read once as app/
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if _NAMED.search(line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_naming_the_backends_loads_no_sdk() -> None:
    # A fresh interpreter: the CLI's --help lists the backends through `llm`.
    probe = ("import sys, llm\nllm.backend_names()\n"
             "print(sorted(m for m in ('google.genai', 'openai', 'pydantic', 'tenacity') "
             "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=REPO)
    assert proc.stdout.strip() == "[]"
