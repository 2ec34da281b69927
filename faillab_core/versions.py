"""Versions made from code, for results cached or stored beside the rules that produced them.

A hand-bumped version string goes stale the first time someone changes a rule and forgets it;
a digest of the rule modules' own source cannot. Any edit to those files (a comment included)
gives a new version, which at worst recomputes results that would have come out the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def code_version(prefix: str, files: Iterable[Path]) -> str:
    """``prefix-<12 hex digits>``: a digest of the files' names and bytes. Where the files
    live and the order they are given in do not count, so a copy of the code elsewhere (an
    installed package, a checkout) has the same version."""
    digest = hashlib.sha256()
    for name, data in sorted({(path.name, path.read_bytes()) for path in files}):
        digest.update(name.encode())
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return f"{prefix}-{digest.hexdigest()[:12]}"


def package_files(*modules_or_files: str | Path) -> list[Path]:
    """The ``.py`` files of each package folder named (a module's ``__file__`` stands for its
    folder when it is an ``__init__.py``) and each single module file."""
    out: set[Path] = set()
    for item in modules_or_files:
        path = Path(item)
        if path.name == "__init__.py" or path.is_dir():
            folder = path.parent if path.name == "__init__.py" else path
            out.update(folder.glob("*.py"))
        else:
            out.add(path)
    return sorted(out)
