"""Versions made from code change with the code and only with it."""

from __future__ import annotations

from pathlib import Path

from faillab_core.versions import code_version, package_files


def test_a_changed_rule_file_is_a_new_version_and_order_does_not_matter(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("RULE = 1\n")
    b.write_text("OTHER = 2\n")
    first = code_version("rules", [a, b])
    assert first == code_version("rules", [b, a, a])
    assert first.startswith("rules-") and len(first) == len("rules-") + 12
    a.write_text("RULE = 2\n")
    assert code_version("rules", [a, b]) != first


def test_package_files_reads_a_package_s_folder_and_single_modules(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_rules.py").write_text("")
    (pkg / "notes.txt").write_text("")
    single = tmp_path / "scoring.py"
    single.write_text("")
    files = package_files(pkg / "__init__.py", single)
    assert [f.name for f in files] == ["__init__.py", "_rules.py", "scoring.py"]


def test_the_judge_s_version_follows_its_rule_files() -> None:
    import trajectories.reading
    import trajectories.scoring
    import trajectories.scoring_ehrsql
    from trajectories.judge import JUDGE_VERSION
    from trajectories.judge import __file__ as judge_init

    files = package_files(judge_init, trajectories.scoring.__file__,
                          trajectories.scoring_ehrsql.__file__, trajectories.reading.__file__)
    assert {f.name for f in files} >= {"_layers.py", "_prose.py", "scoring.py",
                                       "scoring_ehrsql.py", "_tables.py"}
    assert code_version("judge", files) == JUDGE_VERSION
