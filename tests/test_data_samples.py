"""The top-level data/ folder: the published schema and the sample files docs and tests use."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from click.testing import CliRunner

from faillab.cli import main
from trajectories.importers import read_file
from trajectories.workspace import Workspace

DATA = Path(__file__).resolve().parent.parent / "data"
DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_native_sample_follows_the_published_schema() -> None:
    validator = jsonschema.Draft202012Validator(
        json.loads((DATA / "trajectory.schema.json").read_text(encoding="utf-8")))
    lines = (DATA / "native-sample.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        errors = list(validator.iter_errors(json.loads(line)))
        assert errors == []


def test_native_sample_imports(tmp_path: Path) -> None:
    parsed = read_file(DATA / "native-sample.jsonl")
    assert len(parsed.trajectories) == 2
    ws = tmp_path / "ws"
    result = CliRunner().invoke(main, ["import", str(DATA / "native-sample.jsonl"),
                                       "--workspace", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["imported"] == 2
    assert Workspace(ws).summary()["failed"] == 1


def test_the_schema_rejects_what_the_model_rejects() -> None:
    validator = jsonschema.Draft202012Validator(
        json.loads((DATA / "trajectory.schema.json").read_text(encoding="utf-8")))
    record = json.loads((DATA / "native-sample.jsonl").read_text(encoding="utf-8").splitlines()[0])
    del record["run"]["model"]
    assert not validator.is_valid(record)
    record = json.loads((DATA / "native-sample.jsonl").read_text(encoding="utf-8").splitlines()[0])
    record["steps"][0]["kind"] = "telepathy"
    assert not validator.is_valid(record)


def test_every_data_file_is_described_and_used_by_the_docs() -> None:
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    docs = "".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md"))
    for path in DATA.iterdir():
        if path.name == "README.md":
            continue
        assert f"`{path.name}`" in readme or path.name in readme, path.name
        assert f"data/{path.name}" in docs, path.name
