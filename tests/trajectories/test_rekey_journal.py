"""The journal of re-keys whose labels are still to carry: chaining across imports, settling."""

from __future__ import annotations

from pathlib import Path

from trajectories import rekey_journal
from trajectories.rekey_journal import PendingRekeys


def test_a_second_reimport_chains_to_the_latest_id() -> None:
    pending = PendingRekeys({"a": "b", "x": "y"}, ["gone"])
    out = rekey_journal.merged(pending, {"b": "c"}, ["y"])
    assert out.rekeyed == {"a": "c", "b": "c"}
    assert out.orphaned == ["gone", "x", "y"]


def test_written_read_and_settled(tmp_path: Path) -> None:
    assert not rekey_journal.read(tmp_path)
    rekey_journal.write(tmp_path, PendingRekeys({"a": "b", "c": "d"}, ["e"]))
    back = rekey_journal.read(tmp_path)
    assert back.rekeyed == {"a": "b", "c": "d"} and back.orphaned == ["e"]
    rekey_journal.write(tmp_path, rekey_journal.without(back, ["a", "e"]))
    assert rekey_journal.read(tmp_path).rekeyed == {"c": "d"}
    rekey_journal.write(tmp_path, rekey_journal.without(rekey_journal.read(tmp_path), ["c"]))
    assert not (tmp_path / rekey_journal.JOURNAL).exists()
