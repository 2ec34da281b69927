"""`faillab stats` and the Statistics page count the same labels by default: on a demo with
heuristic pre-labels only, both count none of them (the CLI once reported 51 labelled
failures where the page showed 0 rows), and with LLM-only labels asked for both count them
all. The page's label choice and the CLI's --labels run one policy (analysis.sources)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.sources import (
    Inputs,
    compute_table,
    final_labels,
    labeller_pairs,
    load_frame,
)
from faillab.app.widgets.stats_data import counted_labels
from faillab.app.widgets.stats_options import LABEL_SCOPES
from faillab.cli import main
from labeling.store import open_store
from trajectories.workspace import Workspace

LABEL_TABLES = ("taxonomy", "taxonomy_turns", "provenance")


@pytest.fixture(scope="module")
def prelabelled(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stats-agree") / "ws"
    shutil.copytree(demo_workspace, root)
    result = CliRunner().invoke(main, ["prelabel", "--labeler", "heuristic", "--workspace",
                                       str(root)])
    assert result.exit_code == 0, result.stderr
    return root


def _cli(root: Path, table: str, *extra: str) -> pd.DataFrame:
    result = CliRunner().invoke(main, ["stats", table, "--format", "csv", "--workspace",
                                       str(root), *extra])
    assert result.exit_code == 0, result.stderr
    return pd.read_csv(io.StringIO(result.stdout))


def _page(root: Path, table: str, scope: str) -> pd.DataFrame:
    ws = Workspace(root)
    store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
    try:
        labels, pairs = final_labels(store), labeller_pairs(store)
    finally:
        store.close()
    counted = labels if table == "provenance" else counted_labels(labels, scope)
    frame = load_frame(ws, None, "verdict")
    out = compute_table(table, Inputs(frame, counted, pairs))
    return pd.read_csv(io.StringIO(out.to_csv(index=False)))


@pytest.mark.parametrize("table", LABEL_TABLES)
@pytest.mark.parametrize(("scope", "flag"), [(LABEL_SCOPES[0], "human-confirmed"),
                                             (LABEL_SCOPES[1], "all")])
def test_cli_and_page_count_the_same_labels(prelabelled: Path, table: str, scope: str,
                                            flag: str) -> None:
    cli = _cli(prelabelled, table, "--labels", flag)
    page = _page(prelabelled, table, scope)
    pd.testing.assert_frame_equal(cli, page, check_dtype=False)


def test_the_default_counts_no_unreviewed_pre_label(prelabelled: Path) -> None:
    default = _cli(prelabelled, "taxonomy")
    every = _cli(prelabelled, "taxonomy", "--labels", "all")
    pd.testing.assert_frame_equal(default, _cli(prelabelled, "taxonomy", "--labels",
                                                "human-confirmed"))
    assert int(every["count"].sum()) > 0
    assert int(default["count"].sum()) == 0 if "count" in default else default.empty
