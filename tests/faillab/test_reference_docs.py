from __future__ import annotations

import json

import jsonschema

from faillab.cli.reference_docs import (
    CONTRACTS,
    CONTRACTS_BEGIN,
    CONTRACTS_END,
    DOCS,
    TRAJECTORY_SCHEMA,
    cli_markdown,
    contracts_markdown,
    settings_markdown,
    trajectory_schema_json,
)
from faillab_core.settings import SETTINGS, Settings


def test_settings_doc_is_current() -> None:
    assert (DOCS / "settings.md").read_text() == settings_markdown(), (
        "docs/settings.md is stale: run python -m faillab.cli.reference_docs")
    for s in SETTINGS:
        assert f"`{s.env}`" in settings_markdown()


def test_cli_doc_is_current() -> None:
    assert (DOCS / "cli.md").read_text() == cli_markdown(), (
        "docs/cli.md is stale: run python -m faillab.cli.reference_docs")


def test_published_trajectory_schema_is_current() -> None:
    assert TRAJECTORY_SCHEMA.read_text(encoding="utf-8") == trajectory_schema_json(), (
        "data/trajectory.schema.json is stale: run python -m faillab.cli.reference_docs")
    jsonschema.Draft202012Validator.check_schema(json.loads(trajectory_schema_json()))


def test_contracts_values_section_is_current() -> None:
    text = CONTRACTS.read_text()
    assert text == contracts_markdown(text), (
        "docs/CONTRACTS.md's generated section is stale: run python -m faillab.cli.reference_docs")
    assert text.count(CONTRACTS_BEGIN) == 1 and text.count(CONTRACTS_END) == 1


def test_contracts_regeneration_keeps_the_hand_written_prose() -> None:
    hand = "# Contracts\n\nProse before.\n\n"
    first = contracts_markdown(hand + "## Later\nProse after.\n")
    assert first.startswith(hand) and "Prose after." in first and CONTRACTS_BEGIN in first
    stale = first.replace("`annotator`, `lead`, `admin`", "`annotator`")
    again = contracts_markdown(stale)
    assert again.count(CONTRACTS_BEGIN) == 1 and "`annotator`, `lead`, `admin`" in again
    assert again.startswith(hand) and again.count("Prose before.") == 1


def test_settings_read_from_environment() -> None:
    s = Settings.from_env({"FAILLAB_WORKSPACE": "/tmp/x", "FAILLAB_BLIND": "false",
                           "FAILLAB_PRELABEL_THRESHOLD": "0.5", "FAILLAB_SQL_ROW_CAP": "10"})
    assert str(s.workspace) == "/tmp/x" and s.blind is False
    assert s.prelabel_threshold == 0.5 and s.sql_row_cap == 10
    assert s.annotations_url().endswith("/tmp/x/annotations.sqlite")
    assert Settings.from_env({"FAILLAB_DATABASE_URL": "postgresql://h/db"}).annotations_url() \
        == "postgresql://h/db"
