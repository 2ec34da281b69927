"""Import hygiene: staging files a killed import left behind, concurrent rejects files, and
lone surrogates in real files reported with the right line and field."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import REPO, make_trajectory
from trajectories.workspace import Workspace


def write_native(path: Path, n: int, *, prefix: str, broken: int = 0) -> Path:
    lines = []
    for i in range(n):
        rec = make_trajectory().model_dump(mode="json", exclude={"id"})
        rec["task"]["id"] = f"{prefix}-{i}"
        lines.append(json.dumps(rec))
    lines += [f'{{"broken {prefix} {i}"' for i in range(broken)]
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


KILLED_WRITER = """
import os, signal, sys
from tests.support import make_trajectory
from trajectories.rows import index_row
from trajectories.workspace import Workspace
ws = Workspace(sys.argv[1])
with ws.parts.write_lock():
    ws.parts.stage_part([index_row(make_trajectory().with_id(), None)])
    print("staged", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_import_cleans_staging_left_by_a_killed_import(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(ws.root)], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL and "staged" in proc.stdout
    left = list(ws.parts_dir.glob(".part-*.tmp"))
    assert len(left) == 1 and not ws.part_files()  # hidden, never visible as data
    code, out, err = invoke("import", str(write_native(tmp_path / "a.jsonl", 2, prefix="a")),
                            "--workspace", str(ws.root), "--json")
    assert code == 0, err
    assert json.loads(out)["imported"] == 2
    assert not list(ws.parts_dir.glob(".part-*.tmp"))
    assert len(ws.existing_ids()) == 2


def test_concurrent_skip_invalid_imports_keep_every_reject(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    files = [write_native(tmp_path / f"{p}.jsonl", 3, prefix=p, broken=2) for p in "xy"]
    procs = [subprocess.Popen([sys.executable, "-m", "faillab.cli", "import", str(f),
                               "--workspace", str(root), "--skip-invalid", "--json"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "FAILLAB_DATABASE_URL": ""})
             for f in files]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        # The import says which runs it read: the valid records' one run.
        report = json.loads(out)
        assert report.pop("runs") == {"run-a": 3}
        assert report == {"imported": 3, "duplicates": 0, "rejected": 2, "replaced": 0}
    rejects = sorted(root.glob("rejects-*.jsonl"))
    assert len(rejects) == 2
    records = sorted(json.loads(line)["record"] for f in rejects
                     for line in f.read_text().splitlines())
    assert records == sorted(f'{{"broken {p} {i}"' for p in "xy" for i in range(2))
    assert not list(root.glob(".rejects-*.tmp"))


def _real_records(path: Path) -> list[dict[str, object]]:
    records = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(records, list) and len(records) >= 2
    return records


def test_lone_surrogate_names_line_and_field(real_trajectory_files: list[Path],
                                             tmp_path: Path) -> None:
    records = _real_records(real_trajectory_files[0])
    lines = [json.dumps(r) for r in records]
    marker = '"instruction": "'
    assert marker in lines[1]
    lines[1] = lines[1].replace(marker, marker + "\\ud800", 1)
    src = tmp_path / "surrogate.jsonl"
    src.write_text("\n".join(lines) + "\n")
    ws = tmp_path / "ws"
    code, _, err = invoke("import", str(src), "--workspace", str(ws))
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "line 2" in err and "field 'info.task.instruction'" in err and "surrogate" in err
    assert not Workspace(ws).part_files()
    code, out, err = invoke("import", str(src), "--workspace", str(ws), "--skip-invalid",
                            "--json")
    assert code == 0, err
    report = json.loads(out)
    assert sum(report.pop("runs").values()) == len(records) - 1
    assert report == {"imported": len(records) - 1, "duplicates": 0, "rejected": 1,
                      "replaced": 0}
    (reject,) = [json.loads(line) for f in ws.glob("rejects-*.jsonl")
                 for line in f.read_text().splitlines()]
    assert reject["location"] == "line 2" and "\\ud800" in reject["record"]


def test_lone_surrogate_in_a_json_list(real_trajectory_files: list[Path],
                                       tmp_path: Path) -> None:
    records = _real_records(real_trajectory_files[0])
    text = json.dumps(records)
    marker = '"instruction": "'
    first = text.index(marker)
    second = text.index(marker, first + 1)
    src = tmp_path / "surrogate.json"
    src.write_text(text[:second] + marker + "\\udfff" + text[second + len(marker):])
    code, _, err = invoke("import", str(src), "--workspace", str(tmp_path / "ws"))
    assert code == 1 and "record 1" in err and "info.task.instruction" in err, err
    code, out, err = invoke("import", str(src), "--workspace", str(tmp_path / "ws"),
                            "--skip-invalid", "--json")
    assert code == 0 and json.loads(out)["rejected"] == 1, err


def test_import_error_quoting_the_file_prints_no_escape_sequences(tmp_path: Path) -> None:
    rec = make_trajectory().model_dump(mode="json", exclude={"id"})
    # The error names the field, and the field name comes from the file.
    rec["task"]["\x1b]0;pwned\x07\x1b[2Jnote\nsecond line"] = "\ud800"
    src = tmp_path / "hostile.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    code, _, err = invoke("import", str(src), "--workspace", str(tmp_path / "ws"))
    assert code == 1 and "line 1" in err and "task." in err and "note" in err, err
    assert "\x1b" not in err and "\x07" not in err and len(err.strip().splitlines()) == 1
