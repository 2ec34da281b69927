"""``faillab clusters`` (look-alike failures) and ``faillab evaluate`` (offline labellers against a
hand-labelled set)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from faillab.cli.common import UserError, emit, open_workspace, people_verdicts, workspace_option

_EMBEDDERS = ("auto", "tfidf", "minilm")


def _embedder(name: str):  # type: ignore[no-untyped-def]
    from opinions.clusters import default_embedder

    try:
        return default_embedder(name)
    except RuntimeError as err:
        raise UserError(str(err)) from None


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object: clusters and members.")
@click.option("--embedder", type=click.Choice(_EMBEDDERS), default="auto", show_default=True,
              help="auto: all-MiniLM-L6-v2 when the 'embeddings' extra is installed, else "
                   "TF-IDF (no extra install).")
@click.option("--distance", type=click.FloatRange(0.0, 2.0), default=None,
              help="Cosine distance at which clusters stop merging (default: the embedder's).")
@workspace_option
def clusters(as_json: bool, embedder: str, distance: float | None,
             workspace: Path | None) -> None:
    """Group the workspace's failed trajectories into look-alike clusters (question, final SQL,
    error text, divergence), largest first; outliers are marked for one-by-one confirmation."""
    from opinions.clusters import build_clusters, workspace_failures

    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"no workspace at {ws.root}: import trajectories first ('faillab import')")
    failures = workspace_failures(ws, people_verdicts(workspace))
    view = build_clusters(failures, _embedder(embedder), distance=distance)
    if as_json:
        emit(view.to_dict())
        return
    click.echo(f"{len(failures)} failures, {len(view.clusters)} clusters "
               f"({view.embedder}, distance {view.distance})")
    for c in view.clusters:
        if len(c.members) < 2:
            continue
        head = view.items[c.members[0]]
        click.echo(f"cluster {c.cluster_id}\t{len(c.members)} items\t{len(c.outliers)} outliers\t"
                   f"cohesion {c.cohesion:.2f}\t{head.question[:80]}")


@click.command()
@click.option("--labels", "labels_path", type=click.Path(path_type=Path, dir_okay=False),
              default=Path("tests/data/ai612_eval/adjudicated.csv"), show_default=True,
              help="Gold labels (CSV: trajectory_id, category, first_error_step).")
@click.option("--trajectories", "traj_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("../shared/data/trajectories/ai612-student"), show_default=True,
              help="Folder of the trajectory files the labels belong to (read, never copied).")
@click.option("--embedder", type=click.Choice(_EMBEDDERS), default="tfidf", show_default=True,
              help="Embedding used by the classifier's features.")
@click.option("--write-floors", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the figures to this JSON (the regression test's floors).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
@click.option("--db", "ehr_db", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="EHR database (SQLite or DuckDB) the finder executes the reference and the "
                   "agent's queries on, read-only and sandboxed (e.g. EHRSQL's mimic_iv.sqlite); "
                   "without it the finder compares structure and recorded output only. With "
                   "--confirmed the default is the workspace's database.")
@click.option("--without-reference", is_flag=True,
              help="Drop every task's reference SQL before labelling (the ground truth stays): "
                   "how the labellers do on a benchmark that has none.")
@click.option("--confirmed", is_flag=True,
              help="Use the workspace's confirmed human labels (adjudicated or human) as gold "
                   "instead of --labels, its failures instead of --trajectories, and report "
                   "its stored pre-labels (Gemini, heuristic) beside the others.")
@workspace_option
def evaluate(labels_path: Path, traj_dir: Path, embedder: str, write_floors: Path | None,
             as_json: bool, ehr_db: Path | None, without_reference: bool, confirmed: bool,
             workspace: Path | None) -> None:
    """Agreement of the heuristic, the first-divergence finder and the classifier
    (cross-validated, grouped by task) with a hand-labelled set: accuracy, Cohen's kappa,
    first-step exact and within one step, share of real (non-fallback) suggestions."""
    from opinions.learn import (
        evaluate_labellers,
        failed_trajectories,
        load_gold,
        without_reference_sql,
    )
    from opinions.learn.evalset import EvalSetError

    if ehr_db is not None and not ehr_db.is_file():
        raise UserError(f"no such EHR database: {ehr_db}")
    if confirmed and without_reference:
        raise UserError("--without-reference applies to a labelled set (--labels), not to "
                        "--confirmed")
    if confirmed:
        figures = _evaluate_confirmed(workspace, embedder, ehr_db)
        _report(figures, as_json)
        return
    if not labels_path.is_file():
        raise UserError(f"no such label file: {labels_path}")
    files = sorted(traj_dir.glob("*.json")) + sorted(traj_dir.glob("*.jsonl"))
    if not files:
        raise UserError(f"no trajectory files (*.json, *.jsonl) in {traj_dir}")
    try:
        gold = load_gold(labels_path)
        failures = failed_trajectories(files)
        if without_reference:
            failures = without_reference_sql(failures)
        figures = evaluate_labellers(failures, gold, _embedder(embedder), ehr_path=ehr_db)
    except (EvalSetError, ValueError) as err:
        raise UserError(str(err)) from None
    figures["labels"] = labels_path.as_posix()
    # The file name only: the floors test finds the same database on another machine by name.
    figures["ehr_db"] = ehr_db.name if ehr_db is not None else None
    figures["reference_sql"] = not without_reference
    if write_floors is not None:
        write_floors.parent.mkdir(parents=True, exist_ok=True)
        write_floors.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n",
                                encoding="utf-8")
        click.echo(f"wrote {write_floors}", err=True)
    _report(figures, as_json)


def _evaluate_confirmed(workspace: Path | None, embedder: str,
                        ehr_db: Path | None) -> dict[str, object]:
    from faillab.cli.users import open_annotations
    from opinions.learn.confirmed import MIN_CONFIRMED, evaluate_confirmed

    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"no workspace at {ws.root}: import trajectories first ('faillab import')")
    store = open_annotations(workspace)
    try:
        figures = evaluate_confirmed(ws, store, _embedder(embedder),
                                     ehr_path=ehr_db or ws.ehr_path)
    except ValueError as err:
        raise UserError(f"{err} (at least {MIN_CONFIRMED} are needed; label some on the "
                        "Annotate or Clusters page)") from None
    finally:
        store.close()
    return figures


def _report(figures: dict[str, object], as_json: bool) -> None:
    if as_json:
        emit(figures)
        return
    click.echo("labeller\taccuracy\tkappa\tstep exact\tstep +-1\tsuggested")
    for name, row in figures.items():
        if isinstance(row, dict) and "accuracy" in row:
            click.echo(f"{name}\t{row['accuracy']:.3f}\t{row['kappa']:.3f}\t"
                       f"{row['step_exact']:.3f}\t{row['step_within_1']:.3f}\t"
                       f"{row['suggested']:.3f}")


__all__ = ["clusters", "evaluate"]
