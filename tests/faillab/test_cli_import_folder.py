"""A folder given to `faillab import` is read whole: every bad file is reported in one line,
nothing is imported, and --skip-invalid imports the good files and lists the bad ones."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import make_trajectory
from trajectories.workspace import Workspace


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    good = [make_trajectory(final_answer=n) for n in range(3)]
    (folder / "a-good.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in good))
    (folder / "b-not-json.json").write_text("<html>an error page saved as a log</html>")
    (folder / "c-deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "d-bad-record.jsonl").write_text(
        make_trajectory().model_dump_json() + "\n" + json.dumps({"task": 3}) + "\n")
    return folder


def test_every_bad_file_of_a_folder_in_one_line_each(tmp_path: Path) -> None:
    folder, ws = _folder(tmp_path), tmp_path / "ws"
    result = CliRunner().invoke(main, ["import", str(folder), "--workspace", str(ws)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.output + result.stderr
    named = [line for line in lines if line.startswith("error: ")]
    for bad in ("b-not-json.json", "c-deep.json", "d-bad-record.jsonl"):
        assert sum(bad in line for line in named) == 1, (bad, lines)
    assert "a-good.jsonl" not in result.stderr
    assert lines[-1] == ("error: 3 files have problems (nothing was imported; --skip-invalid "
                         "imports the rest)")
    assert not Workspace(ws).exists() or len(Workspace(ws).frame()) == 0


def test_skip_invalid_imports_the_good_files(tmp_path: Path) -> None:
    folder, ws = _folder(tmp_path), tmp_path / "ws"
    result = CliRunner().invoke(main, ["import", str(folder), "--workspace", str(ws),
                                       "--skip-invalid", "--json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["imported"] == 4  # three good records and the good line of d
    assert report["rejected"] == 3
    rejects = [json.loads(line) for line in
               next(Path(ws).glob("rejects-*.jsonl")).read_text().splitlines()]
    assert sorted(Path(r["file"]).name for r in rejects) == [
        "b-not-json.json", "c-deep.json", "d-bad-record.jsonl"]
    assert len(Workspace(ws).frame()) == 4
