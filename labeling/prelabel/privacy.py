"""The privacy interlock: one rule for every entry point (CLI, worker, page, batch).

The heuristic labeller never sends data anywhere. Any Gemini run, Developer API or Vertex AI,
interactive or batch, needs an explicit acknowledgement, ``allow_external=True`` (CLI
``--yes-send-data``, the page's confirmation checkbox) or ``FAILLAB_ALLOW_EXTERNAL_LLM=1`` in
the environment, and is refused before anything is sent otherwise. Vertex AI is not exempt: it
*can* be zero-retention, but only once the project is configured for it, which this program
cannot check; the acknowledgement is the person's statement that the data may go where it goes.
Callers show ``privacy_text`` before asking for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from labeling.prelabel.errors import ConsentRequiredError
from labeling.prelabel.options import PrelabelOptions

__all__ = [
    "ALLOW_EXTERNAL_ENV",
    "external_allowed_by_env",
    "privacy_notice",
    "privacy_text",
    "require_consent",
    "sends_data",
]

ALLOW_EXTERNAL_ENV = "FAILLAB_ALLOW_EXTERNAL_LLM"
_TRUE = frozenset({"1", "true", "yes", "on"})


def privacy_notice(vertexai: bool) -> str:
    """What the CLI and the app show before any MIMIC-derived text leaves the machine."""
    rule = (
        "PhysioNet's credentialed-data rules allow MIMIC-derived data (questions, SQL results, "
        "agent trajectories) to be sent only to online services that do not retain it "
        "(zero data retention) and do not use it for training."
    )
    if vertexai:
        return (
            f"{rule} You are using Vertex AI. Vertex AI can be configured for zero data "
            "retention, but it is not automatic: disable prompt caching/logging for the "
            "project and check Google Cloud's zero-data-retention conditions (abuse-monitoring "
            "exemption, grounding off) before sending real MIMIC-derived trajectories."
        )
    return (
        f"{rule} You are using the Gemini Developer API with an API key. It is NOT zero-retention "
        "by default (prompts may be logged for abuse monitoring, and on unpaid tiers used to "
        "improve products), so do not send real MIMIC-derived trajectories through it. Use "
        "Vertex AI configured for zero data retention, or run the local heuristic labeller."
    )


def sends_data(options: PrelabelOptions) -> bool:
    """Whether this run sends trajectory text to an online service."""
    return options.labeller == "gemini"


def external_allowed_by_env(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(ALLOW_EXTERNAL_ENV, "").strip().lower() in _TRUE


def privacy_text(options: PrelabelOptions) -> str:
    """The notice to show before a run that sends data (empty for the heuristic)."""
    return privacy_notice(bool(options.vertex)) if sends_data(options) else ""


def require_consent(options: PrelabelOptions, env: Mapping[str, str] | None = None) -> None:
    """Raise ``ConsentRequiredError`` unless the run keeps data local or was acknowledged."""
    if not sends_data(options) or options.allow_external or external_allowed_by_env(env):
        return
    where = "Vertex AI" if options.vertex else "the Gemini Developer API"
    raise ConsentRequiredError(
        f"refusing to send trajectories to {where} without an explicit acknowledgement: read "
        f"the privacy notice, then pass --yes-send-data (or set {ALLOW_EXTERNAL_ENV}=1)"
    )
