"""Run names for files that hold one conversation each (LM Studio exports, results files).

A run is one model's attempts; a folder of a hundred conversation files is one run, not a
hundred. The run is named after the model, with the folder when the folder says more: the
folder's name alone when it already names the model (``m3-claude-sonnet-4``), else
``model (folder)``. ``--run`` still overrides.
"""

from __future__ import annotations

from pathlib import Path

#: Folder names that say nothing about a run.
_GENERIC = frozenset({"", ".", "..", "tmp", "data", "logs", "conversations", "chats",
                      "exports", "results", "downloads"})


def model_short_name(model: str) -> str:
    """``openai/gpt-oss-20b`` -> ``gpt-oss-20b``; a model's own name without its publisher."""
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def run_for_file(model: str | None, path: Path) -> str:
    """The run a one-conversation file belongs to (the module's rule)."""
    folder = path.resolve().parent.name if path.parent != Path("") else ""
    short = model_short_name(model) if model and model != "unknown" else ""
    if folder.lower() in _GENERIC:
        return short or "unknown"
    if not short or short.lower() in folder.lower():
        return folder
    return f"{short} ({folder})"
