"""`faillab stats` and the Statistics page give the same numbers for every table: both run one
registry (analysis.tables), which applies the label policy and the options. On a demo with
heuristic pre-labels only, both count none of them by default (the CLI once reported 51
labelled failures where the page showed 0 rows), and with LLM-only labels asked for both
count them all."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.sources import (
    STATISTICS,
    Inputs,
    TableOptions,
    compute_table,
)
from faillab.app.widgets.stats_options import LABEL_SCOPES
from faillab.cli import main
from trajectories.workspace import Workspace


@pytest.fixture(scope="module")
def prelabelled(prelabelled_demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
                ) -> Path:
    """A copy of the session's demo with heuristic pre-labels (its store included)."""
    root = tmp_path_factory.mktemp("stats-agree") / "ws"
    shutil.copytree(prelabelled_demo_workspace, root)
    return root


def _cli(root: Path, table: str, *extra: str) -> pd.DataFrame:
    result = CliRunner().invoke(main, ["stats", table, "--format", "csv", "--workspace",
                                       str(root), *extra])
    assert result.exit_code == 0, result.stderr
    return pd.read_csv(io.StringIO(result.stdout))


def test_the_default_counts_no_unreviewed_pre_label(prelabelled: Path) -> None:
    default = _cli(prelabelled, "taxonomy")
    every = _cli(prelabelled, "taxonomy", "--labels", "all")
    pd.testing.assert_frame_equal(default, _cli(prelabelled, "taxonomy", "--labels",
                                                "human-confirmed"))
    assert int(every["count"].sum()) > 0
    assert int(default["count"].sum()) == 0 if "count" in default else default.empty


def _cli_all(root: Path, *extra: str) -> dict[str, list[dict[str, object]]]:
    result = CliRunner().invoke(main, ["stats", "all", "--format", "json", "--workspace",
                                       str(root), *extra])
    assert result.exit_code == 0, result.stderr
    data: dict[str, list[dict[str, object]]] = json.loads(result.stdout)
    return data


def _page_all(root: Path, scope: str, layout: str, definition: str
              ) -> dict[str, list[dict[str, object]]]:
    """Every table as the Statistics page computes it: its cached frame, label frames and
    tables (app/widgets/stats_data), then the Pass^k layout and SR(T) views' registry call."""
    from analysis.export import to_json
    from faillab.app.viewer import viewer_of
    from faillab.app.widgets import stats_data

    ws = Workspace(root)
    url = f"sqlite:///{root / 'annotations.sqlite'}"
    viewer = viewer_of(None)
    frame, signature = stats_data.statistics_frame("verdict", stats_data.verdicts_for(url, viewer),
                                                   ws)
    runs, _, _ = stats_data.filter_options(signature, frame)
    labels, pairs = stats_data.labels_for(url, viewer)
    options = TableOptions(tuple(runs), stats_data.policy_for(scope))
    tables = dict(stats_data.tables_for(signature, tuple(runs), None, None,
                                        stats_data.labels_token(labels, pairs), frame, labels,
                                        pairs, options))
    selected = frame[frame["run"].isin(runs)]
    tables["passk"] = compute_table("passk", Inputs(selected), runs,
                                    TableOptions(tuple(runs), passk_layout=layout))
    tables["turn_budget"] = compute_table("turn_budget", Inputs(selected), runs,
                                          TableOptions(tuple(runs), sr_definition=definition))
    return {name: json.loads(to_json(table)) for name, table in tables.items()}


@pytest.mark.parametrize(("scope", "flag"), [(LABEL_SCOPES[0], "human-confirmed"),
                                             (LABEL_SCOPES[1], "all")])
@pytest.mark.parametrize(("layout", "definition"), [("long", "common_solved"),
                                                    ("paper", "all_trajectories")])
def test_every_table_is_the_same_through_the_cli_and_the_page(
        prelabelled: Path, scope: str, flag: str, layout: str, definition: str) -> None:
    cli = _cli_all(prelabelled, "--labels", flag, "--layout", layout, "--sr-definition",
                   definition)
    page = _page_all(prelabelled, scope, layout, definition)
    assert list(cli) == list(STATISTICS)
    for name in STATISTICS:
        assert cli[name] == page[name], name
    # Not vacuous: the demo fills the trajectory tables, and "all" counts the pre-labels.
    assert all(cli[n] for n in ("success", "passk", "turns", "turn_budget"))
    assert bool(cli["taxonomy"]) == (flag == "all")
