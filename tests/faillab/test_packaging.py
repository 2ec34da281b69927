"""What the install puts on the import path: the workbench as `faillab.app`, never a bare `app`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import importlib.util, json
print(json.dumps({
    "app": importlib.util.find_spec("app") is not None,
    "faillab.app": importlib.util.find_spec("faillab.app") is not None,
}))
"""


def test_the_workbench_is_namespaced(tmp_path: Path) -> None:
    # Run outside the checkout so the current directory can't lend its folders to the path.
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    assert json.loads(proc.stdout) == {"app": False, "faillab.app": True}


def test_serve_runs_the_shipped_entry_point() -> None:
    from faillab import app as app_package

    main_py = Path(app_package.__file__).with_name("main.py")
    assert main_py.is_file()
    assert (main_py.parent / "views").is_dir()
