"""The one labeller interface the runner (and the batch path) drive.

Every labeller is asynchronous: ``await labeller.alabel(trajectory, taxonomy)`` returns the label
and the tokens it was billed. Offline rule engines written as plain functions (the heuristic)
are wrapped in ``SyncLabellerAdapter``, so the runner has one code path and never has to guess a
labeller's shape. What a call was billed (``Usage``) is the LLM transport's (``llm.usage``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from llm.usage import Usage

if TYPE_CHECKING:
    from opinions.prelabel.base import LabelResult
    from taxonomy import Taxonomy
    from trajectories.model import Trajectory

__all__ = ["Labeller", "RuleLabeller", "SyncLabellerAdapter"]


@runtime_checkable
class Labeller(Protocol):
    """What the runner drives. ``remote``: each ``alabel`` is a (billable) request to a service,
    counted in ``RunStats.calls`` and retried on transient errors; local labellers make none."""

    name: str
    version: str
    model: str
    prompt_version: str
    remote: bool

    async def alabel(
        self, trajectory: Trajectory, taxonomy: Taxonomy
    ) -> tuple[LabelResult, Usage]: ...

    async def aclose(self) -> None: ...


class RuleLabeller(Protocol):
    """The shape of an offline rule engine (the heuristic): synchronous, keyed by the taxonomy
    version. Not accepted by the runner directly: wrap it in ``SyncLabellerAdapter``."""

    name: str
    version: str
    model: str
    prompt_version: str

    def label(self, trajectory: Trajectory, taxonomy_version: str) -> LabelResult: ...


class SyncLabellerAdapter:
    """A ``RuleLabeller`` as a ``Labeller``. The rules run inline in the event loop: they are
    pure CPU work of a few milliseconds, and a thread per item would cost more than it saves."""

    remote = False

    def __init__(self, rules: RuleLabeller) -> None:
        self.rules = rules
        self.name = rules.name
        self.version = rules.version
        self.model = rules.model
        self.prompt_version = rules.prompt_version

    async def alabel(
        self, trajectory: Trajectory, taxonomy: Taxonomy
    ) -> tuple[LabelResult, Usage]:
        return self.rules.label(trajectory, taxonomy.version), Usage()

    async def aclose(self) -> None:
        return None
