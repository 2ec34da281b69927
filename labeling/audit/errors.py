"""The audit's one error type."""

from __future__ import annotations

from faillab_core.errors import FaillabError


class AuditError(FaillabError):
    """A problem the user can fix (unknown run, empty pool, too few annotators...)."""
