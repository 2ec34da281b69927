"""The privacy interlock: one rule for every entry point (CLI, worker, page, batch, LLM judge).

MIMIC-derived data (questions, SQL results, answers, whole trajectories) may only go to services
that do not retain it. This program cannot tell synthetic data from MIMIC-derived data, nor
check how a service is configured, so it treats every workspace as MIMIC-derived and asks:

- The heuristic labeller never sends data anywhere: no question.
- An OpenAI-compatible server at one of the team's own addresses (``localhost``, loopback,
  private or link-local IP addresses, host names listed in ``FAILLAB_OPENAI_OWN_HOSTS``; see
  ``endpoints.is_own_address``) keeps the data on machines the team runs: allowed without an
  acknowledgement. The notice is still shown, naming the address.
- Anything else (Gemini's Developer API, Vertex AI, any other OpenAI-compatible address) needs
  an explicit acknowledgement, ``allow_external=True`` (CLI ``--yes-send-data``, the page's
  confirmation checkbox) or ``FAILLAB_ALLOW_EXTERNAL_LLM=1`` in the environment, and is refused
  before anything is sent otherwise. Vertex AI and Azure OpenAI are not exempt: they *can* be
  zero-retention, but only once configured for it, which this program cannot check; the
  acknowledgement is the person's statement that the data may go where it goes.

Each backend of the registry (``backends.py``) says where its requests go (a ``Destination``);
callers show ``Destination.notice`` before asking for the acknowledgement, and
``require_destination_consent`` refuses before anything is sent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from llm.endpoints import OpenAIEndpoint, endpoint_host
from llm.errors import ConsentRequiredError

__all__ = [
    "ALLOW_EXTERNAL_ENV",
    "Destination",
    "external_allowed_by_env",
    "gemini_destination",
    "openai_destination",
    "openai_privacy_notice",
    "privacy_notice",
    "require_destination_consent",
]

ALLOW_EXTERNAL_ENV = "FAILLAB_ALLOW_EXTERNAL_LLM"
_TRUE = frozenset({"1", "true", "yes", "on"})

_RULE = (
    "PhysioNet's credentialed-data rules allow MIMIC-derived data (questions, SQL results, "
    "agent trajectories) to be sent only to online services that do not retain it "
    "(zero data retention) and do not use it for training."
)


@dataclass(frozen=True)
class Destination:
    """Where data would go. ``own_machines``: one of the team's own addresses, so no
    acknowledgement is needed."""

    service: str  # as the refusal names it: "Vertex AI", "the OpenAI-compatible server at ..."
    notice: str
    own_machines: bool = False


def privacy_notice(vertexai: bool) -> str:
    """What the CLI and the app show before any MIMIC-derived text goes to Gemini."""
    if vertexai:
        return (
            f"{_RULE} You are using Vertex AI. Vertex AI can be configured for zero data "
            "retention, but it is not automatic: disable prompt caching/logging for the "
            "project and check Google Cloud's zero-data-retention conditions (abuse-monitoring "
            "exemption, grounding off) before sending real MIMIC-derived trajectories."
        )
    return (
        f"{_RULE} You are using the Gemini Developer API with an API key. It is NOT zero-retention "
        "by default (prompts may be logged for abuse monitoring, and on unpaid tiers used to "
        "improve products), so do not send real MIMIC-derived trajectories through it. Use "
        "Vertex AI configured for zero data retention, or run the local heuristic labeller."
    )


def openai_privacy_notice(endpoint: OpenAIEndpoint) -> str:
    """What is shown before text goes to an OpenAI-compatible server."""
    url = endpoint.base_url or "(no address: set FAILLAB_OPENAI_BASE_URL)"
    if endpoint.own_machine:
        return (
            f"{_RULE} You are using the OpenAI-compatible server at {url}, a local or private "
            "address (this machine or your own network), so the data stays on machines you "
            "run and no acknowledgement is needed. This program cannot see where that server "
            "sends requests on: if it is a proxy to an online service, treat it as one."
        )
    plain = (
        " The address uses plain http: the data would also cross the network unencrypted."
        if url.lower().startswith("http://") else ""
    )
    return (
        f"{_RULE} You are using the OpenAI-compatible server at {url}. It is NOT a local or "
        "private address (nor listed in FAILLAB_OPENAI_OWN_HOSTS), so the data leaves your "
        "machines: send real MIMIC-derived trajectories only if that service keeps no data "
        "(e.g. Azure OpenAI approved for zero data retention; OpenAI's API only under a "
        "zero-data-retention agreement). Otherwise run a model on your own server (vLLM, "
        f"Ollama, LM Studio) at a local address, or the offline heuristic labeller.{plain}"
    )


def gemini_destination(vertexai: bool) -> Destination:
    return Destination(
        "Vertex AI" if vertexai else "the Gemini Developer API", privacy_notice(vertexai)
    )


def openai_destination(endpoint: OpenAIEndpoint) -> Destination:
    host = endpoint_host(endpoint.base_url) or endpoint.base_url or "(no address)"
    return Destination(
        f"the OpenAI-compatible server at {host}",
        openai_privacy_notice(endpoint),
        own_machines=endpoint.own_machine,
    )


def external_allowed_by_env(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(ALLOW_EXTERNAL_ENV, "").strip().lower() in _TRUE


def require_destination_consent(
    dest: Destination | None,
    allow_external: bool,
    env: Mapping[str, str] | None = None,
    *,
    what: str = "trajectories",
) -> None:
    """Raise ``ConsentRequiredError`` unless ``dest`` keeps data on the team's machines or the
    sending was acknowledged."""
    if dest is None or dest.own_machines or allow_external or external_allowed_by_env(env):
        return
    raise ConsentRequiredError(
        f"refusing to send {what} to {dest.service} without an explicit acknowledgement: read "
        f"the privacy notice, then pass --yes-send-data (or set {ALLOW_EXTERNAL_ENV}=1)"
    )
