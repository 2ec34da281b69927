"""The app does not serve an empty workspace in place of one the annotation store labels."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from faillab.cli import main
from tests.support import REPO, make_trajectory


def test_pages_say_the_workspace_is_missing(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "failures.jsonl"
    run.write_text("".join(make_trajectory(final_answer=n).model_dump_json() + "\n"
                           for n in range(2)))
    ws = tmp_path / "ws"
    for args in (["import", str(run)], ["prelabel", "--labeler", "heuristic"]):
        result = CliRunner().invoke(main, [*args, "--workspace", str(ws)])
        assert result.exit_code == 0, result.stderr
    monkeypatch.setenv("FAILLAB_WORKSPACE", str(ws))
    monkeypatch.setenv("FAILLAB_TRAJECTORIES_URL", "")
    app = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60)
    app.run()
    assert not app.exception and not app.error
    # The trajectories folder moved away (a wrong path, an unmounted disk): the labels stay.
    shutil.move(ws / "trajectories", tmp_path / "elsewhere")
    fresh = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60)
    fresh.run()
    assert not fresh.exception
    assert [e.value for e in fresh.error] and "holds labels on 2 trajectories" in \
        fresh.error[0].value
