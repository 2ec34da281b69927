"""A damaged Batch API state file (truncated, not JSON, the wrong shape) is one clear error
naming the file, from the batch step and from ``faillab prelabel --status`` alike; it is never
taken for "no batch" (it names jobs already paid for)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from opinions.prelabel.batch import BatchError, load_state, state_path

GOOD = ('{"model": "m", "taxonomy_version": "v", "prompt_version": "p", '
        '"jobs": [{"name": "batches/1", "keys": ["t1", "t2"]}]}')
DAMAGED = {
    "truncated": GOOD[: len(GOOD) // 2],
    "not JSON": "this is not json",
    "not UTF-8": "\udcff",
    "a list": "[]",
    "null": "null",
    "jobs not a list": '{"model": "m", "taxonomy_version": "v", "prompt_version": "p", '
                       '"jobs": 5}',
    "a job not an object": '{"model": "m", "taxonomy_version": "v", "prompt_version": "p", '
                           '"jobs": [5]}',
    "keys a string": GOOD.replace('["t1", "t2"]', '"t1"'),
    "an unknown field": GOOD.replace('"keys"', '"bogus": 1, "keys"'),
    "a missing field": GOOD.replace('"model": "m", ', ""),
}


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))


def test_a_good_state_file_loads(tmp_path: Path) -> None:
    _write(state_path(tmp_path), GOOD)
    state = load_state(state_path(tmp_path))
    assert state is not None and [j.keys for j in state.open_jobs] == [["t1", "t2"]]


@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_a_damaged_state_file_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    path = state_path(tmp_path)
    _write(path, DAMAGED[kind])
    with pytest.raises(BatchError) as caught:
        load_state(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message

    result = CliRunner().invoke(main, ["prelabel", "--status", "--workspace", str(tmp_path)],
                                env={"FAILLAB_DATABASE_URL": ""})
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and str(path) in lines[0]
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert path.read_bytes() == DAMAGED[kind].encode("utf-8", errors="surrogateescape")
