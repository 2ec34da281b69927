"""The category keys have one home, the taxonomy files: `taxonomy.keys` names them and is checked
against the files, and no product module spells a key as a string of its own."""

from __future__ import annotations

import dataclasses
import re

import pytest

import taxonomy.keys as tk
from taxonomy import Taxonomy, builtin_taxonomies
from tests.support import REPO

PRODUCT_PACKAGES = ("faillab", "faillab_core", "llm", "trajectories", "labeling", "opinions",
                    "analysis", "app", "taxonomy")


def test_the_constants_agree_with_the_builtin_files() -> None:
    files = builtin_taxonomies()
    assert tk.disagreements() == []
    assert files[tk.EHR_COMPLEX].keys == tk.EHR_COMPLEX_KEYS
    assert files[tk.ROBUSTGYM].keys == tk.ROBUSTGYM_KEYS


def _renamed(tax: Taxonomy, old: str, new: str) -> Taxonomy:
    cats = tuple(dataclasses.replace(c, key=new) if c.key == old else c for c in tax.categories)
    return dataclasses.replace(tax, categories=cats)


def test_a_key_renamed_in_a_file_is_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    files = builtin_taxonomies()
    files[tk.EHR_COMPLEX] = _renamed(files[tk.EHR_COMPLEX], tk.STUCK_IN_LOOP, "looping")
    monkeypatch.setattr(tk, "builtin_taxonomies", lambda: files)
    problems = tk.disagreements()
    assert len(problems) == 1 and "'ehr_complex'" in problems[0] and "looping" in problems[0]


def test_a_missing_taxonomy_is_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    files = builtin_taxonomies()
    del files[tk.ROBUSTGYM]
    monkeypatch.setattr(tk, "builtin_taxonomies", lambda: files)
    assert tk.disagreements() == ["taxonomy 'robustgym': no built-in file has this name"]


def test_no_product_module_spells_a_category_key() -> None:
    every_key = set(tk.EHR_COMPLEX_KEYS) | set(tk.ROBUSTGYM_KEYS)
    literal = re.compile("[\"'](" + "|".join(sorted(every_key)) + ")[\"']")
    offenders = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for package in PRODUCT_PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if path != REPO / "taxonomy" / "keys.py"
        for match in literal.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
