"""The audit's one error type."""

from __future__ import annotations


class AuditError(Exception):
    """A problem the user can fix (unknown run, empty pool, too few annotators...)."""
