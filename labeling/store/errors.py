"""Errors raised by the annotation store.

Callers (the UI, the CLI) catch `StoreError` to show a message; the subclasses let them react
differently, e.g. a `ConflictError` means "reload and try again", not "something broke".
"""

from __future__ import annotations

from faillab_core.errors import FaillabError


class StoreError(FaillabError):
    """Base class for every error the store raises on purpose."""


class StoreUnavailableError(StoreError):
    """The annotation database does not answer (stopped, restarted, the network down). What
    the caller was doing did not happen; the same call works again once it is back."""


class StoreStorageError(StoreUnavailableError):
    """The machine, not the data, refused: a full disk, a read-only file system, no permission,
    a disk I/O error, a file another program keeps locked, a PostgreSQL server out of
    connections. One line naming the store and the cause; the transaction was rolled back, so
    nothing was half-saved, and the same call works again once the cause is gone."""


class NotFoundError(StoreError, LookupError):
    """A user, audit, item or run the caller named does not exist."""


class PermissionDeniedError(StoreError, PermissionError):
    """The acting user's role does not allow the action (e.g. an annotator adjudicating)."""


class ConflictError(StoreError):
    """Someone else changed the record first, or a unique value is already taken."""


class DataImportError(StoreError, ValueError):
    """A file could not be imported; nothing from it was stored.

    `row` is the 1-based data row number (header excluded) when the problem is in one row.
    """

    def __init__(self, message: str, row: int | None = None) -> None:
        super().__init__(message if row is None else f"row {row}: {message}")
        self.row = row


class LabelImportError(DataImportError):
    """A labels file (CSV or JSONL) failed validation."""


class JudgmentImportError(DataImportError):
    """An audit judgments file failed validation."""
