"""Taxonomies as versioned data: loading, versioning, validation and the rubric."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from taxonomy import (
    DATA_DIR,
    Category,
    Taxonomy,
    TaxonomyError,
    UnknownCategoryError,
    builtin_taxonomies,
    default_taxonomy,
    load_taxonomy,
    rubric_markdown,
)

EHR_COMPLEX_ORDER = (
    ("semantic_misunderstanding", "Semantic Misunderstanding"),
    ("medical_code_lookup_error", "Medical-Code Lookup Error"),
    ("sql_logic_error", "SQL Logic Error"),
    ("variable_scope_error", "Variable Scope Error"),
    ("answer_format_error", "Answer Format Error"),
    ("stuck_in_loop", "Stuck-in-Loop"),
)


def _raw(name: str = "ehr_complex_v1.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA_DIR / name).read_text(encoding="utf-8"))
    return data


def _write(tmp_path: Path, data: Any, name: str = "tax.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_builtin_files_all_load() -> None:
    files = sorted(DATA_DIR.glob("*.json"))
    assert len(files) >= 2
    taxonomies = builtin_taxonomies()
    assert set(taxonomies) == {load_taxonomy(f).name for f in files}
    assert {"ehr_complex", "robustgym"} <= set(taxonomies)
    for tax in taxonomies.values():
        assert len(tax.keys) == len(set(tax.keys)), f"duplicate keys in {tax.name}"
        assert len(tax.names) == len(set(tax.names))
        for cat in tax.categories:
            assert re.fullmatch(r"[a-z][a-z0-9_]*", cat.key)
            assert cat.name and cat.definition and cat.rules
            assert {"question", "ground_truth", "agent_answer", "local_error", "analysis"} <= set(
                cat.example
            ), f"{tax.name}/{cat.key} example incomplete"


def test_ehr_complex_has_the_six_categories_in_order() -> None:
    tax = default_taxonomy()
    assert tax.name == "ehr_complex"
    assert tuple(zip(tax.keys, tax.names, strict=True)) == EHR_COMPLEX_ORDER
    assert tax.category("sql_logic_error").definition.startswith("Implements incorrect query")
    # The borderline rule the heuristic labeller also follows.
    code_rules = " ".join(tax.category("medical_code_lookup_error").rules)
    assert "not used" in code_rules and "not a SQL Logic Error" in code_rules


def test_category_lookup_by_key_or_name() -> None:
    tax = default_taxonomy()
    assert tax.category("Stuck-in-Loop").key == "stuck_in_loop"
    assert tax.category("stuck in loop").key == "stuck_in_loop"
    assert tax.category("medical_code_lookup_error").name == "Medical-Code Lookup Error"
    assert "SQL Logic Error" in tax
    assert "nonsense" not in tax
    with pytest.raises(UnknownCategoryError, match="known keys"):
        tax.category("nonsense")
    with pytest.raises(KeyError):  # also a KeyError, for callers that expect one
        tax.category("nonsense")


def test_version_is_stable_across_loads_and_round_trips() -> None:
    path = DATA_DIR / "ehr_complex_v1.json"
    first, second = load_taxonomy(path), load_taxonomy(path)
    assert first.version == second.version
    assert re.fullmatch(r"ehr_complex@1\+[0-9a-f]{8}", first.version)
    again = Taxonomy.from_json(first.to_json())
    assert again == first
    assert again.version == first.version
    # Formatting of the file does not matter; content does.
    compact = json.dumps(_raw(), separators=(",", ":"))
    assert Taxonomy.from_json(compact).version == first.version


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["categories"][0].__setitem__(
            "definition", d["categories"][0]["definition"] + "!"
        ),
        lambda d: d["categories"][2]["rules"].append("One more rule."),
        lambda d: d["categories"][5]["example"].__setitem__("analysis", "changed"),
        lambda d: d.__setitem__("title", "Another title"),
        lambda d: d["categories"].reverse(),
        lambda d: d.__setitem__("version", "2"),
    ],
    ids=["definition", "rule", "example", "title", "order", "declared"],
)
def test_any_edit_changes_the_version(tmp_path: Path, edit: Any) -> None:
    original = load_taxonomy(DATA_DIR / "ehr_complex_v1.json")
    data = _raw()
    edit(data)
    edited = load_taxonomy(_write(tmp_path, data))
    assert edited.declared_version in {"1", "2"}
    assert edited.version != original.version


def test_another_taxonomy_file_loads_without_code_change(tmp_path: Path) -> None:
    data = {
        "name": "tiny",
        "title": "Tiny",
        "version": 3,
        "categories": [
            {"key": "a", "name": "A", "definition": "first"},
            {"key": "b", "name": "B", "definition": "second", "rules": ["r"]},
        ],
    }
    tax = load_taxonomy(_write(tmp_path, data))
    assert tax.keys == ("a", "b")
    assert tax.declared_version == "3"
    assert tax.version.startswith("tiny@3+")
    assert tax.category("B").rules == ("r",)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("categories"), "categories"),
        (lambda d: d.__setitem__("categories", []), "categories"),
        (
            lambda d: d["categories"][1].__setitem__("key", d["categories"][0]["key"]),
            "categories[1].key",
        ),
        (lambda d: d["categories"][2].__setitem__("name", "  "), "categories[2].name"),
        (lambda d: d["categories"][3].pop("definition"), "categories[3].definition"),
        (lambda d: d["categories"][0].__setitem__("key", "Bad Key"), "categories[0].key"),
        (lambda d: d["categories"][4].__setitem__("rules", "not a list"), "categories[4].rules"),
        (
            lambda d: d["categories"][5].__setitem__("example", {"question": 3}),
            "categories[5].example",
        ),
        (lambda d: d.pop("name"), "name"),
        (lambda d: d.__setitem__("version", ""), "version"),
    ],
    ids=[
        "no-categories",
        "empty-categories",
        "dup-key",
        "empty-name",
        "no-definition",
        "bad-key",
        "rules-type",
        "example-type",
        "no-name",
        "empty-version",
    ],
)
def test_malformed_files_name_file_and_field(tmp_path: Path, mutate: Any, field: str) -> None:
    data = _raw()
    mutate(data)
    path = _write(tmp_path, data, "broken.json")
    with pytest.raises(TaxonomyError) as info:
        load_taxonomy(path)
    message = str(info.value)
    assert "broken.json" in message
    assert field in message


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "{ not json", "garbage.json")
    with pytest.raises(TaxonomyError, match=r"garbage\.json.*not valid JSON"):
        load_taxonomy(path)
    with pytest.raises(TaxonomyError, match="top level"):
        load_taxonomy(_write(tmp_path, "[1, 2]", "list.json"))
    with pytest.raises(TaxonomyError, match=r"absent\.json"):
        load_taxonomy(tmp_path / "absent.json")


def test_rubric_markdown_is_complete_and_has_no_raw_html() -> None:
    for tax in builtin_taxonomies().values():
        md = rubric_markdown(tax)
        assert tax.version in md
        for cat in tax.categories:
            assert f"`{cat.key}`" in md
        assert "Decision rules" in md and "Example" in md
        # No raw HTML tags: every '<' is backslash-escaped.
        assert not re.search(r"(?<!\\)<", md)
    md = rubric_markdown(default_taxonomy())
    assert "care unit" in md and "25000" in md


def test_rubric_escapes_html_in_content() -> None:
    tax = Taxonomy(
        name="x",
        title="X <script>alert(1)</script>",
        declared_version="1",
        categories=(
            Category(
                key="a",
                name="A <b>bold</b>",
                definition="uses <img src=x onerror=alert(1)> & more",
                rules=("count <= 3",),
                example={"question": "<i>q</i>"},
            ),
        ),
    )
    md = rubric_markdown(tax)
    # Every angle bracket is backslash-escaped, so no renderer sees a tag.
    assert not re.search(r"(?<!\\)[<>]", md)
    assert r"\<script\>" in md and r"\<img" in md


def test_taxonomy_objects_are_frozen_and_hashable() -> None:
    tax = default_taxonomy()
    with pytest.raises(AttributeError):
        tax.name = "other"  # type: ignore[misc]
    assert hash(tax) == hash(load_taxonomy(DATA_DIR / "ehr_complex_v1.json"))
