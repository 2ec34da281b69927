"""Failure taxonomies as versioned data.

A taxonomy lives in a JSON file, so a new or edited taxonomy needs no code change. Its version
combines the version the author declared with a hash of the content: labels record that version,
and an edit that forgot to bump the declared number still yields a distinguishable version, so
labels made under an older rubric are never silently mixed with newer ones.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from faillab_core.errors import FaillabError

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_TAXONOMY = "ehr_complex"

_KEY_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_EXAMPLE_FIELDS = ("question", "ground_truth", "agent_answer", "local_error", "analysis")


class TaxonomyError(FaillabError, ValueError):
    """A taxonomy file or text is malformed; the message names the file (if any) and field."""


class UnknownCategoryError(TaxonomyError, KeyError):
    """A category key or name that the taxonomy does not contain."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Category:
    key: str
    name: str
    definition: str
    rules: tuple[str, ...] = ()
    example: dict[str, str] = field(default_factory=dict, hash=False, compare=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "definition": self.definition,
            "rules": list(self.rules),
            "example": dict(self.example),
        }


@dataclass(frozen=True)
class Taxonomy:
    name: str
    title: str
    declared_version: str
    categories: tuple[Category, ...]
    source: str = ""
    # Rules that apply across categories (e.g. how to pick the primary label).
    guidelines: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "version": self.declared_version,
            "source": self.source,
            "guidelines": list(self.guidelines),
            "categories": [c.to_dict() for c in self.categories],
        }

    @cached_property  # hashed on every label; the taxonomy is frozen, so compute once
    def content_hash(self) -> str:
        canonical = json.dumps(
            self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def version(self) -> str:
        return f"{self.name}@{self.declared_version}+{self.content_hash[:8]}"

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.categories)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.categories)

    def __contains__(self, key_or_name: object) -> bool:
        if not isinstance(key_or_name, str):
            return False
        try:
            self.category(key_or_name)
        except UnknownCategoryError:
            return False
        return True

    def category(self, key_or_name: str) -> Category:
        """Look a category up by key, or by display name (case and spacing insensitive)."""
        for c in self.categories:
            if c.key == key_or_name:
                return c
        wanted = _fold(key_or_name)
        for c in self.categories:
            if _fold(c.name) == wanted or _fold(c.key) == wanted:
                return c
        raise UnknownCategoryError(
            f"taxonomy {self.name!r} has no category {key_or_name!r}; "
            f"known keys: {', '.join(self.keys)}"
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Taxonomy:
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError) as exc:
            raise TaxonomyError(f"not valid JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> Taxonomy:
        if not isinstance(data, dict):
            raise TaxonomyError("top level: expected a JSON object")
        name = _required_str(data, "name", "name")
        if not _KEY_RE.match(name):
            raise TaxonomyError(f"name: {name!r} must be snake_case (a-z, 0-9, _)")
        title = _optional_str(data, "title", "title") or name
        declared = data.get("version")
        if isinstance(declared, int | float) and not isinstance(declared, bool):
            declared = str(declared)
        if not isinstance(declared, str) or not declared.strip():
            raise TaxonomyError('version: missing or empty (declare e.g. "1")')
        source = _optional_str(data, "source", "source")
        guidelines = _str_list(data.get("guidelines", []), "guidelines")

        raw_categories = data.get("categories")
        if raw_categories is None:
            raise TaxonomyError("categories: missing")
        if not isinstance(raw_categories, list) or not raw_categories:
            raise TaxonomyError("categories: expected a non-empty list")
        categories: list[Category] = []
        seen_keys: set[str] = set()
        seen_names: set[str] = set()
        for i, raw in enumerate(raw_categories):
            where = f"categories[{i}]"
            if not isinstance(raw, dict):
                raise TaxonomyError(f"{where}: expected an object")
            key = _required_str(raw, "key", f"{where}.key")
            if not _KEY_RE.match(key):
                raise TaxonomyError(f"{where}.key: {key!r} must be snake_case (a-z, 0-9, _)")
            if key in seen_keys:
                raise TaxonomyError(f"{where}.key: duplicate key {key!r}")
            seen_keys.add(key)
            cat_name = _required_str(raw, "name", f"{where}.name")
            if _fold(cat_name) in seen_names:
                raise TaxonomyError(f"{where}.name: duplicate name {cat_name!r}")
            seen_names.add(_fold(cat_name))
            definition = _required_str(raw, "definition", f"{where}.definition")
            rules = _str_list(raw.get("rules", []), f"{where}.rules")
            example_raw = raw.get("example", {})
            if not isinstance(example_raw, dict):
                raise TaxonomyError(f"{where}.example: expected an object")
            example: dict[str, str] = {}
            for k, v in example_raw.items():
                if not isinstance(v, str):
                    raise TaxonomyError(f"{where}.example.{k}: expected a string")
                example[str(k)] = v
            categories.append(
                Category(
                    key=key,
                    name=cat_name,
                    definition=definition,
                    rules=tuple(rules),
                    example=example,
                )
            )
        return cls(
            name=name,
            title=title,
            declared_version=declared.strip(),
            categories=tuple(categories),
            source=source,
            guidelines=tuple(guidelines),
        )


def _fold(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text).strip().casefold()


def _required_str(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if value is None:
        raise TaxonomyError(f"{where}: missing")
    if not isinstance(value, str):
        raise TaxonomyError(f"{where}: expected a string, got {type(value).__name__}")
    if not value.strip():
        raise TaxonomyError(f"{where}: must not be empty")
    return value.strip()


def _optional_str(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TaxonomyError(f"{where}: expected a string, got {type(value).__name__}")
    return value.strip()


def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise TaxonomyError(f"{where}: expected a list of strings")
    out: list[str] = []
    for j, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise TaxonomyError(f"{where}[{j}]: expected a non-empty string")
        out.append(item.strip())
    return out


def load_taxonomy(path: Path | str) -> Taxonomy:
    """Read a taxonomy file; errors name the file and the field at fault."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaxonomyError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TaxonomyError(f"{p}: not UTF-8 text") from None
    try:
        return Taxonomy.from_json(text)
    except TaxonomyError as exc:
        raise TaxonomyError(f"{p}: {exc}") from None


def builtin_taxonomies() -> dict[str, Taxonomy]:
    """Every taxonomy shipped in ``taxonomy/data``, keyed by its ``name``."""
    out: dict[str, Taxonomy] = {}
    for path in sorted(DATA_DIR.glob("*.json")):
        tax = load_taxonomy(path)
        if tax.name in out:
            raise TaxonomyError(f"{path}: name: {tax.name!r} already used by another file")
        out[tax.name] = tax
    return out


def default_taxonomy() -> Taxonomy:
    return builtin_taxonomies()[DEFAULT_TAXONOMY]


# Characters that would be read as Markdown markup or raw HTML. Backslash escapes keep the text
# literal in any CommonMark renderer (including Streamlit's) without resorting to HTML entities.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&])")


def _md(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _example_label(field_name: str) -> str:
    return field_name.replace("_", " ").capitalize()


def rubric_markdown(taxonomy: Taxonomy) -> str:
    """The rubric as plain Markdown (no HTML): definitions, decision rules and an example per
    category, meant to sit next to a labelling form."""
    lines: list[str] = [f"## {_md(taxonomy.title)}", "", f"Version: `{taxonomy.version}`", ""]
    if taxonomy.source:
        lines += [f"Source: {_md(taxonomy.source)}", ""]
    if taxonomy.guidelines:
        lines += ["**General rules**", ""]
        lines += [f"- {_md(g)}" for g in taxonomy.guidelines]
        lines.append("")
    for number, cat in enumerate(taxonomy.categories, start=1):
        lines += [f"### {number}. {_md(cat.name)} (`{cat.key}`)", "", _md(cat.definition), ""]
        if cat.rules:
            lines += ["**Decision rules**", ""]
            lines += [f"- {_md(r)}" for r in cat.rules]
            lines.append("")
        if cat.example:
            lines += ["**Example**", ""]
            ordered = [k for k in _EXAMPLE_FIELDS if k in cat.example]
            ordered += [k for k in cat.example if k not in _EXAMPLE_FIELDS]
            lines += [f"- *{_example_label(k)}:* {_md(cat.example[k])}" for k in ordered]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
