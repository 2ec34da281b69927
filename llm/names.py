"""Constants that name things without importing an SDK (the options, the help text and the
pages read them)."""

from __future__ import annotations

__all__ = ["DEFAULT_GEMINI_MODEL", "DEFAULT_GEMINI_TIMEOUT_S", "GEMINI", "OPENAI_COMPATIBLE"]

DEFAULT_GEMINI_MODEL = "gemini-2.5-pro"
# The total deadline of one Gemini request when the settings give none.
DEFAULT_GEMINI_TIMEOUT_S = 60.0

# The backends' names, as the options, the CLI and the stored runs spell them; the registry
# (``backends.py``) is the one list of them.
GEMINI = "gemini"
OPENAI_COMPATIBLE = "openai-compatible"
