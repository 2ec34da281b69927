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

from llm.backends import Connection, backend, backend_names, backends, is_backend
from llm.endpoints import OpenAIEndpoint
from llm.names import DEFAULT_GEMINI_MODEL
from llm.retry import DEFAULT_ITEM_DEADLINE_S
from opinions.prelabel.run_errors import PrelabelServiceError

if TYPE_CHECKING:
    from faillab_core.settings import Settings

__all__ = [
    "DEFAULT_GEMINI_MODEL",
    "HEURISTIC",
    "OPTIONS",
    "OptionSpec",
    "PrelabelOptions",
    "labeller_names",
    "option_spec",
]

#: The offline labeller: no LLM backend, it sends nothing anywhere.
HEURISTIC = "heuristic"


def labeller_names() -> tuple[str, ...]:
    """Every labeller a run may name: the offline heuristic, then each LLM backend of the
    registry (``llm.backends``)."""
    return (HEURISTIC, *backend_names())


def _labeller_help() -> str:
    parts = [f"{HEURISTIC}: offline rules."]
    parts += [f"{b.name}: {b.help}." for b in backends()]
    return " ".join(parts) + " See the privacy notice."


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
    OptionSpec("labeller", "--labeler", "choice", _labeller_help(),
               choices=labeller_names(), label="Labeller"),
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

    labeller: str = HEURISTIC
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
    # The deadlines (settings, read by ``with_defaults``): one request's total (None: the
    # backend's default), every call and pause of one item, every item of the run.
    timeout_s: float | None = None
    item_deadline_s: float | None = DEFAULT_ITEM_DEADLINE_S
    run_deadline_s: float | None = None
    # A Batch API step, polling included (``batch.py``).
    batch_deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.labeller not in labeller_names():
            raise PrelabelServiceError(
                f"unknown labeller {self.labeller!r}; choose one of "
                f"{', '.join(labeller_names())}"
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

    @property
    def uses_llm(self) -> bool:
        """Whether the labeller is an LLM backend (each item a request to a service)."""
        return is_backend(self.labeller)

    def with_defaults(self, settings: Settings) -> PrelabelOptions:
        """The options with what the settings say filled in: the backend's connection (model,
        address, Vertex AI) and the deadlines. ``PrelabelServiceError`` names what is missing."""
        deadlines = replace(self, item_deadline_s=settings.llm_item_deadline_s,
                            run_deadline_s=settings.llm_run_deadline_h * 3600,
                            batch_deadline_s=settings.batch_deadline_h * 3600)
        if not self.uses_llm:
            return deadlines
        conn = backend(self.labeller).connect(
            settings, model=self.model, vertex=self.vertex, project=self.project,
            location=self.location, base_url=self.base_url, endpoint=self.openai,
        )
        return replace(deadlines, model=conn.model, vertex=conn.vertex if conn.endpoint is None
                       else None, project=conn.project, location=conn.location,
                       base_url=conn.base_url if conn.endpoint is None else self.base_url,
                       openai=conn.endpoint, timeout_s=conn.timeout_s)

    def connection(self) -> Connection:
        """What the LLM backend's client is built from (read after ``with_defaults``)."""
        return Connection(self.labeller, model=self.model or "", vertex=bool(self.vertex),
                          project=self.project, location=self.location,
                          base_url=self.base_url, endpoint=self.openai,
                          timeout_s=self.timeout_s)

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
