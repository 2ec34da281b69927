"""`faillab stats labeller --calibration` (each labeller's reliability and calibration error on
the people-checked items) and `faillab stats taxonomy_corrected` on a pre-labelled demo where
people checked some failures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.sources import TableOptions, compute_table, load_inputs
from faillab.cli import main
from labeling.store import open_store
from taxonomy.model import default_taxonomy
from trajectories.workspace import Workspace

VERSION = default_taxonomy().version
OTHER = "answer_format_error"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["stats", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def checked_ws(prelabelled_demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> Path:
    """The pre-labelled demo with 24 failures checked by a person: the heuristic's category
    confirmed on two of three, overridden on the third."""
    root = tmp_path_factory.mktemp("calibration") / "ws"
    shutil.copytree(prelabelled_demo_workspace, root)
    store = open_store(Workspace(root).default_annotations_url)
    try:
        store.users.add("ann")
        opinions = sorted(store.prelabels.opinions(VERSION).items())[:24]
        for i, (tid, opinion) in enumerate(opinions):
            wrong = "semantic_misunderstanding" if opinion.category == OTHER else OTHER
            store.labels.add(tid, opinion.category if i % 3 else wrong, annotator="ann",
                             taxonomy_version=VERSION)
    finally:
        store.close()
    return root


def test_calibration_tables_measure_each_labeller_on_the_checked_items(checked_ws: Path
                                                                       ) -> None:
    code, out, err = invoke("labeller", "--calibration", "--format", "json", "--workspace",
                            str(checked_ws))
    assert code == 0, err
    tables = json.loads(out)
    assert set(tables) == {"labeller", "labeller_calibration", "labeller_reliability"}
    rows = {(r["labeller"], r["category"]): r for r in tables["labeller_calibration"]}
    heuristic = rows[("heuristic", "(all)")]
    assert heuristic["measured_on"] == "workspace" and heuristic["checked"] == 24
    assert heuristic["agreement"] == pytest.approx(16 / 24)
    assert heuristic["ece_raw"] is not None and heuristic["ece_calibrated"] is not None
    per_category = [r for (name, cat), r in rows.items() if name == "heuristic" and cat != "(all)"]
    assert sum(r["checked"] for r in per_category) == 24
    # The classifier is cross-validated on the same 24 confirmed labels.
    assert rows[("classifier", "(all)")]["measured_on"] == "workspace"
    assert rows[("classifier", "(all)")]["checked"] == 24
    bins = [b for b in tables["labeller_reliability"]
            if b["labeller"] == "heuristic" and b["kind"] == "raw"]
    assert sum(b["n"] for b in bins) == 24


def test_without_checked_items_the_development_measurement_shows(demo_workspace: Path) -> None:
    code, out, err = invoke("labeller", "--calibration", "--format", "json", "--workspace",
                            str(demo_workspace))
    assert code == 0, err
    rows = json.loads(out)["labeller_calibration"]
    assert {r["measured_on"] for r in rows} == {"development set"}
    assert {r["labeller"] for r in rows} == {"heuristic", "finder", "classifier"}
    assert not (demo_workspace / "annotations.sqlite").exists()
    code, _, err = invoke("success", "--calibration", "--workspace", str(demo_workspace))
    assert code == 1 and "goes with the 'labeller' table" in err


def test_corrected_shares_count_every_failure_through_the_registry(checked_ws: Path) -> None:
    code, out, err = invoke("taxonomy_corrected", "--format", "json", "--workspace",
                            str(checked_ws))
    assert code == 0, err
    rows = json.loads(out)
    ws = Workspace(checked_ws)
    store = open_store(ws.default_annotations_url)
    try:
        inputs = load_inputs(ws, store)
        expected = compute_table("taxonomy_corrected", inputs)
        every = compute_table("taxonomy", inputs, options=TableOptions(label_policy="all"))
        people = compute_table("taxonomy", inputs)
    finally:
        store.close()
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected.to_dict("records"), strict=True):
        assert row["share"] == pytest.approx(want["share"])
        assert row["ci_low"] == pytest.approx(want["ci_low"])
    # Every labelled failure the taxonomy table counts with --labels all is counted here,
    # people's among them (24 checked, less any left unscored), and the table says how much
    # of it is the machine's.
    assert sum(r["people"] + r["machine"] for r in rows) == int(every["count"].sum())
    assert sum(r["people"] for r in rows) == int(people["count"].sum()) > 20
    assert all(r["interval"] == "bootstrap" and r["checked"] == 24 for r in rows)
    by_model: dict[str, float] = {}
    for r in rows:
        by_model[r["model"]] = by_model.get(r["model"], 0.0) + r["share"]
    assert all(total == pytest.approx(1.0) for total in by_model.values())
