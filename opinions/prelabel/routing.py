"""A labeller's stored pre-labels, read for many items at once. Which of them people review
and which are left to the labeller is routing by measured trust (``opinions.learn.trust``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from opinions.prelabel.base import PrelabelRecord
from opinions.prelabel.labellers import labeller_identity
from opinions.prelabel.options import PrelabelOptions
from taxonomy import Taxonomy

if TYPE_CHECKING:
    from labeling.store import Store


def prelabel_confidences(
    store: Store,
    trajectory_ids: Iterable[str],
    options: PrelabelOptions,
    taxonomy: Taxonomy,
) -> dict[str, PrelabelRecord | None]:
    """The stored pre-label of each trajectory for this labeller and taxonomy (None: none yet),
    read in one query."""
    _name, model, prompt_version = labeller_identity(options)
    cached = store.prelabels.get_many(taxonomy.version, prompt_version, model)
    return {tid: cached.get(tid) for tid in trajectory_ids}
