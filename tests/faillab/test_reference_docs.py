from __future__ import annotations

import json

import jsonschema

from faillab.reference_docs import (
    DOCS,
    TRAJECTORY_SCHEMA,
    cli_markdown,
    settings_markdown,
    trajectory_schema_json,
)
from faillab.settings import SETTINGS, Settings


def test_settings_doc_is_current() -> None:
    assert (DOCS / "settings.md").read_text() == settings_markdown(), (
        "docs/settings.md is stale: run python -m faillab.reference_docs")
    for s in SETTINGS:
        assert f"`{s.env}`" in settings_markdown()


def test_cli_doc_is_current() -> None:
    assert (DOCS / "cli.md").read_text() == cli_markdown(), (
        "docs/cli.md is stale: run python -m faillab.reference_docs")


def test_published_trajectory_schema_is_current() -> None:
    assert TRAJECTORY_SCHEMA.read_text(encoding="utf-8") == trajectory_schema_json(), (
        "data/trajectory.schema.json is stale: run python -m faillab.reference_docs")
    jsonschema.Draft202012Validator.check_schema(json.loads(trajectory_schema_json()))


def test_settings_read_from_environment() -> None:
    s = Settings.from_env({"FAILLAB_WORKSPACE": "/tmp/x", "FAILLAB_BLIND": "false",
                           "FAILLAB_PRELABEL_THRESHOLD": "0.5", "FAILLAB_SQL_ROW_CAP": "10"})
    assert str(s.workspace) == "/tmp/x" and s.blind is False
    assert s.prelabel_threshold == 0.5 and s.sql_row_cap == 10
    assert s.annotations_url().endswith("/tmp/x/annotations.sqlite")
    assert Settings.from_env({"FAILLAB_DATABASE_URL": "postgresql://h/db"}).annotations_url() \
        == "postgresql://h/db"
