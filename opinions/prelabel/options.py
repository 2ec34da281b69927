"""What a pre-labelling run is asked to do: the options, defined once.

``OPTIONS`` is the single definition of every run option (flag, help, type, bounds). The visible
``faillab prelabel`` command and the hidden worker command build their click options from it,
``PrelabelOptions.to_argv`` turns options back into those flags for a launched worker, and the
page takes its labels, bounds and help text from it; adding an option here adds it everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from opinions.prelabel.endpoints import OpenAIEndpoint
from opinions.prelabel.errors import PrelabelServiceError

if TYPE_CHECKING:
    from faillab_core.settings import Settings

__all__ = [
    "DEFAULT_GEMINI_MODEL",
    "LABELLERS",
    "OPTIONS",
    "REMOTE_LABELLERS",
    "OptionSpec",
    "PrelabelOptions",
    "option_spec",
]

LABELLERS: tuple[str, ...] = ("heuristic", "gemini", "openai-compatible")
# The labellers that send trajectory text to a service (each call a request).
REMOTE_LABELLERS: tuple[str, ...] = ("gemini", "openai-compatible")
# Here, not in gemini.py, so that naming the default does not import the SDK.
DEFAULT_GEMINI_MODEL = "gemini-2.5-pro"


@dataclass(frozen=True)
class OptionSpec:
    """One run option. ``kind``: ``choice`` / ``text`` / ``count`` (an int >= ``minimum``) /
    ``path`` / ``switch`` (``--x/--no-x``, may stay unset) / ``flag`` (``--x``, off by default).
    """

    field: str  # the PrelabelOptions attribute
    flag: str
    kind: Literal["choice", "text", "count", "path", "switch", "flag"]
    help: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    label: str = ""  # the page's widget label


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("labeller", "--labeler", "choice",
               "heuristic: offline rules. gemini: Google's online model. openai-compatible: "
               "any OpenAI-compatible server at $FAILLAB_OPENAI_BASE_URL (vLLM, Ollama, "
               "LM Studio, Azure OpenAI). See the privacy notice.",
               choices=LABELLERS, label="Labeller"),
    OptionSpec("model", "--model", "text",
               f"Model (default: $FAILLAB_GEMINI_MODEL, else {DEFAULT_GEMINI_MODEL}, for "
               "gemini; $FAILLAB_OPENAI_MODEL for openai-compatible).",
               label="Model"),
    OptionSpec("concurrency", "--concurrency", "count",
               "Most LLM requests in flight at once.", minimum=1,
               label="Concurrency (requests in flight)"),
    OptionSpec("limit", "--limit", "count",
               "Send at most N trajectories this run (already labelled ones are free).",
               minimum=1, label="Limit"),
    OptionSpec("taxonomy_path", "--taxonomy", "path",
               "Taxonomy JSON file (default: the built-in default taxonomy).",
               label="Taxonomy file"),
    OptionSpec("vertex", "--vertex", "switch",
               "Gemini: use Vertex AI (default: when $GOOGLE_CLOUD_PROJECT is set).",
               label="Use Vertex AI"),
    OptionSpec("project", "--project", "text", "Vertex AI project.", label="Project"),
    OptionSpec("location", "--location", "text", "Vertex AI location.", label="Location"),
    OptionSpec("allow_external", "--yes-send-data", "flag",
               "Acknowledge the privacy notice: allow sending trajectories to an online LLM "
               "service (not needed for an OpenAI-compatible server at a local or private "
               "address).",
               label="I have read the notice: the trajectories in this workspace may be sent "
                     "to this service."),
)


def option_spec(field: str) -> OptionSpec:
    for spec in OPTIONS:
        if spec.field == field:
            return spec
    raise KeyError(field)


@dataclass(frozen=True)
class PrelabelOptions:
    """What to run. ``None`` fields fall back to the settings (``with_defaults``)."""

    labeller: str = "heuristic"
    model: str | None = None  # LLM model; ignored by the heuristic
    concurrency: int = 8
    limit: int | None = None  # most trajectories *sent* this run; cached ones do not count
    taxonomy_path: Path | None = None  # None: the default taxonomy
    vertex: bool | None = None  # None: Vertex AI when the settings name a project
    project: str | None = None
    location: str | None = None
    # API address override (tests: the local fake server). Not a flag: a launched worker reads
    # it from its environment, like every other setting.
    base_url: str | None = None
    allow_external: bool = False  # the person acknowledged the privacy notice
    # The OpenAI-compatible server (address, key, response format...), from the settings by
    # ``with_defaults``. Not a flag either: the key must never reach a command line.
    openai: OpenAIEndpoint | None = None

    def __post_init__(self) -> None:
        if self.labeller not in LABELLERS:
            raise PrelabelServiceError(
                f"unknown labeller {self.labeller!r}; choose one of {', '.join(LABELLERS)}"
            )
        if self.concurrency < 1:
            raise PrelabelServiceError("concurrency must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise PrelabelServiceError("limit must be at least 1 (omit it for no limit)")

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> PrelabelOptions:
        """From the parsed command-line parameters (named by ``OptionSpec.field``); other
        parameters of the command are ignored, absent ones keep their defaults."""
        known = {s.field for s in OPTIONS}
        return cls(**{k: v for k, v in params.items() if k in known})  # type: ignore[arg-type]

    def with_defaults(self, settings: Settings) -> PrelabelOptions:
        if self.labeller == "openai-compatible":
            return self._openai_defaults(settings)
        if self.labeller != "gemini":
            return self
        vertex = self.vertex if self.vertex is not None else bool(settings.vertex_project)
        return replace(
            self,
            model=self.model or settings.gemini_model,
            vertex=vertex,
            project=self.project or (settings.vertex_project or None if vertex else None),
            location=self.location or (settings.vertex_location or None if vertex else None),
            # The Developer API override must not leak into a Vertex client (other address).
            base_url=self.base_url or (None if vertex else settings.gemini_base_url or None),
        )

    def _openai_defaults(self, settings: Settings) -> PrelabelOptions:
        try:
            endpoint = self.openai or OpenAIEndpoint.from_settings(
                settings, base_url=self.base_url
            )
        except ValueError as e:
            raise PrelabelServiceError(str(e)) from None
        if not endpoint.base_url:
            raise PrelabelServiceError(
                "no OpenAI-compatible server: set FAILLAB_OPENAI_BASE_URL, e.g. "
                "http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama), "
                "http://localhost:1234/v1 (LM Studio)"
            )
        model = self.model or settings.openai_model
        if not model:
            raise PrelabelServiceError(
                "no model for the OpenAI-compatible server: pass --model or set "
                "FAILLAB_OPENAI_MODEL (the name the server lists under /v1/models; Azure "
                "OpenAI: the deployment name)"
            )
        return replace(self, model=model, vertex=None, project=None, location=None,
                       openai=endpoint)

    def to_argv(self) -> list[str]:
        """The same options as command-line flags (what ``OPTIONS`` parses back)."""
        args: list[str] = []
        for spec in OPTIONS:
            value = getattr(self, spec.field)
            if spec.kind == "flag":
                if value:
                    args.append(spec.flag)
            elif spec.kind == "switch":
                if value is not None:
                    args.append(spec.flag if value else f"--no-{spec.flag[2:]}")
            elif value is not None and value != "":
                args += [spec.flag, str(value)]
        return args
