"""The root of every error a user can act on.

Each package raises its own error classes (``WorkspaceError``, ``StoreError``, ``SettingsError``,
...), and each derives from ``FaillabError``, whose message is one line saying what went wrong and
what to do. The faces rely on that: the CLI prints any ``FaillabError`` that reaches it as one
``error:`` line with status 1, never a traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class FaillabError(Exception):
    """An error the user can fix; ``str(err)`` is the one line to show them."""
