"""Evidence before opinion: where an agent's queries leave the reference SQL's path."""

from __future__ import annotations

from labeling.evidence.finder import Divergence, Evidence, RefParts, decompose, find_divergence

__all__ = ["Divergence", "Evidence", "RefParts", "decompose", "find_divergence"]
