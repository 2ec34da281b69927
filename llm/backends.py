"""The registry of LLM backends: every backend name, and all that hangs on one, is here.

Each backend registers its name (as options, the CLI and stored runs spell it), how it is
titled, whether its structured-output mode is negotiated (and reported), whether it has a Batch
API path, how a ``Connection`` is read from the settings (with a run's overrides), where its
requests go (a ``privacy.Destination``: whether the zero-retention acknowledgement is needed),
its prices for the cost estimate, and how its client is built. Callers ask the registry
(``backend(name)``, ``backend_names()``); none compares backend names.

Every backend is remote: its requests leave this process. The offline labeller (the heuristic)
is no LLM backend; its name is the pre-labellers' (``opinions.prelabel``).

Nothing here imports an SDK: a client's module is imported when a client is built.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from llm.endpoints import OpenAIEndpoint
from llm.errors import LLMConfigError
from llm.names import DEFAULT_GEMINI_MODEL, DEFAULT_GEMINI_TIMEOUT_S, GEMINI, OPENAI_COMPATIBLE
from llm.privacy import Destination, gemini_destination, openai_destination

if TYPE_CHECKING:
    from faillab_core.settings import Settings
    from llm.client import JsonLLM

__all__ = [
    "Backend",
    "Connection",
    "backend",
    "backend_names",
    "backends",
    "is_backend",
    "register",
]


@dataclass(frozen=True)
class Connection:
    """One backend, one model and where its requests go: what a client is built from.
    ``timeout_s`` is the total deadline of one request. Gemini reads ``vertex``, ``project``,
    ``location`` and ``base_url`` (an override of the API's address); an OpenAI-compatible
    server reads ``endpoint`` (else ``base_url``)."""

    backend: str
    model: str = ""
    vertex: bool = False
    project: str | None = None
    location: str | None = None
    base_url: str | None = None
    endpoint: OpenAIEndpoint | None = None
    timeout_s: float | None = None


class Backend:
    """A backend's facts and how to reach it; subclasses register with ``register``."""

    name: str = ""
    title: str = ""  # as a page names it
    help: str = ""  # one line, for the CLI's --help
    #: The answers' structured-output mode is negotiated with the server (and reported).
    chooses_format: bool = False
    #: Has a Batch API path (``faillab prelabel --batch``).
    batch: bool = False
    #: The model when neither a run nor the settings name one ("": none, one must be named).
    fallback_model: str = ""
    #: Can run on Vertex AI instead (``--vertex``).
    has_vertex: bool = False

    def default_model(self, settings: Settings) -> str:
        raise NotImplementedError

    def connect(
        self,
        settings: Settings,
        *,
        model: str | None = None,
        vertex: bool | None = None,
        project: str | None = None,
        location: str | None = None,
        base_url: str | None = None,
        endpoint: OpenAIEndpoint | None = None,
    ) -> Connection:
        """The connection the settings describe, a run's own values winning.
        ``LLMConfigError`` names what is missing or unreadable."""
        raise NotImplementedError

    def destination(self, conn: Connection) -> Destination:
        """Where the requests go, and whether that needs the person's acknowledgement."""
        raise NotImplementedError

    def prices(self, conn: Connection) -> tuple[float, float] | None:
        """USD per 1M input and output tokens the settings give, else None (the price table)."""
        return None

    def server(self, conn: Connection) -> str | None:
        """The address the settings send requests to, as a page names it (None: the
        service's own)."""
        return None

    def client(self, conn: Connection) -> JsonLLM:
        """The client (``LLMConfigError`` when it cannot be built: no key, no address)."""
        raise NotImplementedError


class GeminiBackend(Backend):
    name = GEMINI
    title = "Gemini (online)"
    help = "Google's online model"
    batch = True
    fallback_model = DEFAULT_GEMINI_MODEL
    has_vertex = True

    def default_model(self, settings: Settings) -> str:
        return settings.gemini_model or self.fallback_model

    def connect(
        self,
        settings: Settings,
        *,
        model: str | None = None,
        vertex: bool | None = None,
        project: str | None = None,
        location: str | None = None,
        base_url: str | None = None,
        endpoint: OpenAIEndpoint | None = None,
    ) -> Connection:
        on_vertex = vertex if vertex is not None else bool(settings.vertex_project)
        return Connection(
            self.name,
            model=model or self.default_model(settings),
            vertex=on_vertex,
            project=project or (settings.vertex_project or None if on_vertex else None),
            location=location or (settings.vertex_location or None if on_vertex else None),
            # The Developer API override must not leak into a Vertex client (other address).
            base_url=base_url or (None if on_vertex else settings.gemini_base_url or None),
            timeout_s=settings.gemini_timeout_s,
        )

    def destination(self, conn: Connection) -> Destination:
        return gemini_destination(conn.vertex)

    def client(self, conn: Connection) -> JsonLLM:
        # Imported here: the SDK is heavy and naming the backend should not pay for it.
        from llm.gemini import GeminiJsonClient

        return GeminiJsonClient(
            conn.model or self.fallback_model,
            vertexai=conn.vertex,
            project=conn.project,
            location=conn.location,
            base_url=conn.base_url,
            timeout_s=conn.timeout_s or DEFAULT_GEMINI_TIMEOUT_S,
        )


class OpenAICompatibleBackend(Backend):
    name = OPENAI_COMPATIBLE
    title = "OpenAI-compatible server"
    help = (
        "any OpenAI-compatible server at $FAILLAB_OPENAI_BASE_URL (vLLM, Ollama, LM Studio, "
        "Azure OpenAI)"
    )
    chooses_format = True

    def default_model(self, settings: Settings) -> str:
        return settings.openai_model

    def connect(
        self,
        settings: Settings,
        *,
        model: str | None = None,
        vertex: bool | None = None,
        project: str | None = None,
        location: str | None = None,
        base_url: str | None = None,
        endpoint: OpenAIEndpoint | None = None,
    ) -> Connection:
        try:
            endpoint = endpoint or OpenAIEndpoint.from_settings(settings, base_url=base_url)
        except ValueError as e:
            raise LLMConfigError(str(e)) from None
        if not endpoint.base_url:
            raise LLMConfigError(
                "no OpenAI-compatible server: set FAILLAB_OPENAI_BASE_URL, e.g. "
                "http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama), "
                "http://localhost:1234/v1 (LM Studio)"
            )
        name = model or self.default_model(settings)
        if not name:
            raise LLMConfigError(
                "no model for the OpenAI-compatible server: pass --model or set "
                "FAILLAB_OPENAI_MODEL (the name the server lists under /v1/models; Azure "
                "OpenAI: the deployment name)"
            )
        return Connection(self.name, model=name, endpoint=endpoint, timeout_s=endpoint.timeout_s)

    def _endpoint(self, conn: Connection) -> OpenAIEndpoint:
        return conn.endpoint or OpenAIEndpoint(conn.base_url or "")

    def destination(self, conn: Connection) -> Destination:
        return openai_destination(self._endpoint(conn))

    def prices(self, conn: Connection) -> tuple[float, float] | None:
        return self._endpoint(conn).price_per_mtok

    def server(self, conn: Connection) -> str | None:
        return f"`{self._endpoint(conn).base_url or 'not set'}` (FAILLAB_OPENAI_BASE_URL)"

    def client(self, conn: Connection) -> JsonLLM:
        from llm.openai_compat import OpenAICompatClient

        endpoint = self._endpoint(conn)
        if conn.timeout_s is not None and conn.timeout_s != endpoint.timeout_s:
            endpoint = replace(endpoint, timeout_s=conn.timeout_s)
        return OpenAICompatClient(endpoint, conn.model)


_REGISTRY: dict[str, Backend] = {}


def register(entry: Backend) -> Backend:
    """Add a backend (its name must be new)."""
    if not entry.name or entry.name in _REGISTRY:
        raise ValueError(f"an LLM backend needs a new name, not {entry.name!r}")
    _REGISTRY[entry.name] = entry
    return entry


register(GeminiBackend())
register(OpenAICompatibleBackend())


def backend_names() -> tuple[str, ...]:
    """Every backend's name, in the order they registered."""
    return tuple(_REGISTRY)


def backends() -> tuple[Backend, ...]:
    return tuple(_REGISTRY.values())


def backend(name: str) -> Backend:
    """The backend of that name; ``LLMConfigError`` names the known ones."""
    found = _REGISTRY.get(name)
    if found is None:
        raise LLMConfigError(f"unknown LLM backend {name!r}; choose one of {', '.join(_REGISTRY)}")
    return found


def is_backend(name: str) -> bool:
    return name in _REGISTRY
