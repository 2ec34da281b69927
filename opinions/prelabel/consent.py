"""The privacy interlock (``llm.privacy``) for a pre-labelling run's options: where the run
would send trajectory text (its backend's ``Destination``; nowhere for an offline labeller),
whether that needs the person's acknowledgement, and the refusal before anything is sent."""

from __future__ import annotations

from collections.abc import Mapping

from llm.backends import backend, is_backend
from llm.privacy import Destination, require_destination_consent
from opinions.prelabel.options import PrelabelOptions

__all__ = ["destination", "needs_consent", "privacy_text", "require_consent", "sends_data"]


def destination(options: PrelabelOptions) -> Destination | None:
    """Where this run would send trajectory text; None when it keeps everything local."""
    if not is_backend(options.labeller):
        return None
    return backend(options.labeller).destination(options.connection())


def sends_data(options: PrelabelOptions) -> bool:
    """Whether this run sends trajectory text to a service (an own server included)."""
    return destination(options) is not None


def needs_consent(options: PrelabelOptions) -> bool:
    """Whether this run needs the person's acknowledgement before anything is sent."""
    dest = destination(options)
    return dest is not None and not dest.own_machines


def privacy_text(options: PrelabelOptions) -> str:
    """The notice to show before a run that sends data (empty for the heuristic)."""
    dest = destination(options)
    return dest.notice if dest is not None else ""


def require_consent(options: PrelabelOptions, env: Mapping[str, str] | None = None) -> None:
    """Raise ``ConsentRequiredError`` unless the run keeps data local or was acknowledged."""
    require_destination_consent(destination(options), options.allow_external, env)
