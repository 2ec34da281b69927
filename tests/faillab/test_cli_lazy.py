"""`faillab --help` stays light: sub-commands are imported only when invoked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from faillab.cli.commands import LAZY_COMMANDS, load_command, main
from tests.support import write_native_run

HEAVY = ("pandas", "duckdb", "sqlalchemy", "pyarrow", "trajectories.workspace", "labeling.store")

PROBE = """
import json, sys
import faillab.cli.common
from faillab.cli import main
try:
    main(["--help"], standalone_mode=False)
finally:
    print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


def test_help_imports_none_of_the_heavy_libraries() -> None:
    # A fresh interpreter: this test process has imported everything already.
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY)],
                          capture_output=True, text=True, check=True)
    assert "Commands:" in proc.stdout
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert loaded == []


def test_a_subcommand_does_load_its_module() -> None:
    # The probe above must be able to see a heavy import: invoking a command pulls DuckDB in.
    probe = ("import sys\nfrom faillab.cli import main\n"
             "main(['summary', '--help'], standalone_mode=False)\n"
             "print('duckdb' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert proc.stderr.strip().splitlines()[-1] == "True"


def test_listed_help_lines_are_the_commands_own() -> None:
    for name, (path, line) in LAZY_COMMANDS.items():
        command = load_command(path)
        expected = "" if command.hidden else command.get_short_help_str(limit=10**6)
        assert line == expected, name
        assert command.name == name


def test_every_command_is_reachable() -> None:
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        assert main.get_command(ctx, name) is not None, name


RUN_PROBE = """
import json, sys
from faillab.cli import main
try:
    main({args!r}, standalone_mode=False)
finally:
    print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


def _modules_loaded_by(args: list[str], heavy: tuple[str, ...]) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", RUN_PROBE.format(args=args, heavy=heavy)],
                          capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(proc.stderr.strip().splitlines()[-1])
    return loaded


def test_import_and_summary_leave_the_label_store_and_pandas_alone(tmp_path: Path) -> None:
    # An import with no annotation store has no label to carry: the store's modules (~0.8 s
    # to import) stay out (pandas comes in with pyarrow's array building there), and
    # `summary` needs neither them nor pandas (pyarrow.dataset's).
    src = write_native_run(tmp_path / "in.jsonl", 3)
    ws = str(tmp_path / "ws")
    heavy = ("labeling.store", "sqlalchemy", "pandas")
    assert _modules_loaded_by(["import", str(src), "--workspace", ws], heavy) == ["pandas"]
    assert _modules_loaded_by(["summary", "--workspace", ws], heavy) == []
    # The probe sees these modules when a command does need them.
    assert "labeling.store" in _modules_loaded_by(["users", "list", "--workspace", ws], heavy)
