"""``faillab stats``: regenerate the papers' analysis tables from a workspace and its labels.

Formats: ``json`` (a list of row objects; for ``all`` an object keyed by table name), ``csv``,
``md`` (GitHub pipe table), ``latex`` (booktabs), ``html`` (a self-contained plotly chart) and
``png`` (the same chart as an image, rendered by kaleido in the system chromium; a file, never
the terminal).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from faillab.cli.common import (
    UserError,
    check_output,
    echo_text,
    settings_for,
    success_source_option,
    write_output,
)

if TYPE_CHECKING:
    import pandas as pd

    from analysis.exports_paper import ExportContext
    from analysis.tables import TableOptions
    from labeling.store import Store
    from trajectories.workspace import Workspace

FORMATS = ("json", "csv", "md", "latex", "html", "png")
#: Formats written one file per table for 'all' (a chart each, or a CSV each).
_ONE_FILE_EACH = ("html", "csv", "png")
ALL = "all"


def _table_choices() -> list[str]:
    from analysis.sources import table_names

    return [*table_names(), ALL]


def _split_runs(value: str | None) -> list[str] | None:
    if value is None:
        return None
    runs = [r.strip() for r in value.split(",") if r.strip()]
    if not runs:
        raise UserError("--runs needs at least one run name")
    return list(dict.fromkeys(runs))


def open_store(workspace: Path | None) -> Store | None:
    """The annotation store, or None when this workspace has never had one.

    A statistics command must not create an empty SQLite file as a side effect, so a missing
    default store simply means "no labels yet".
    """
    from labeling.store import StoreError, open_store

    settings = settings_for(workspace)
    if not settings.has_annotation_store():
        return None
    try:
        return open_store(settings.annotations_url())
    except (StoreError, OSError) as err:
        raise UserError(f"cannot open the annotation store: {err}") from None
    except Exception as err:  # driver errors (e.g. PostgreSQL unreachable) vary by backend
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"cannot open the annotation store: {first}") from None


def _file(name: str, table: pd.DataFrame, fmt: str, context: ExportContext) -> bytes:
    """The file the Statistics page's Export menu gives for the same table and context."""
    from analysis.exports_paper import export_file

    try:
        return export_file(name, table, fmt, context)
    except Exception as err:
        if fmt != "png":
            raise
        # kaleido's and the browser's failures vary; one line says which
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"cannot render the {name} chart as PNG: {first} (kaleido drives "
                        "the system chromium; set BROWSER_PATH if it is elsewhere)") from None


def _write_png(data: bytes, output: Path) -> None:
    try:
        output.write_bytes(data)
    except OSError as err:
        raise UserError(f"cannot write {output}: {err.strerror or err}") from None


def _write(text: str, output: Path | None, fmt: str) -> None:
    if not text.endswith("\n"):
        text += "\n"
    if output is None:
        # Markdown and LaTeX are read in a terminal: no escape sequence from a run name
        # reaches it. JSON escapes control characters itself; CSV stays exact data.
        if fmt in ("md", "latex"):
            echo_text(text, nl=False)
        else:
            click.echo(text, nl=False)
        return
    write_output(output, text)
    click.echo(f"wrote {output}", err=True)


_SUFFIX = {"json": "json", "csv": "csv", "md": "md", "latex": "tex", "html": "html",
           "png": "png"}
#: Formats an ``--output`` file's extension implies.
_OUTPUT_SUFFIXES = {f".{ext}": fmt for fmt, ext in _SUFFIX.items()} | {".htm": "html"}


def _emit_all(tables: dict[str, pd.DataFrame], fmt: str, output: Path | None,
              context: Callable[[str], ExportContext]) -> None:
    if fmt == "json":
        from analysis.export import to_json

        # Re-parse each table's JSON so the combined document uses the exporter's exact
        # value conversions (NaN -> null, numpy scalars unwrapped).
        combined: dict[str, Any] = {n: json.loads(to_json(t)) for n, t in tables.items()}
        _write(json.dumps(combined, ensure_ascii=False, allow_nan=False) + "\n", output, fmt)
        return
    if fmt in _ONE_FILE_EACH and output is None:
        # Several charts / CSV files cannot share one stream meaningfully.
        raise UserError(f"'stats all --format {fmt}' writes one file per table: give --output DIR")
    if output is not None and fmt in _ONE_FILE_EACH:
        for name, table in tables.items():
            target = output / f"{name}.{_SUFFIX[fmt]}"
            data = _file(name, table, fmt, context(name))
            if fmt == "png":
                _write_png(data, target)
            else:
                write_output(target, data.decode("utf-8"))
        click.echo(f"wrote {len(tables)} files to {output}", err=True)
        return
    # Markdown and LaTeX concatenate into one readable document with a heading per table.
    heading = (lambda n: f"## {n}\n") if fmt == "md" else (lambda n: f"% {n}")
    blocks = [f"{heading(name)}\n{_file(name, table, fmt, context(name)).decode('utf-8')}"
              for name, table in tables.items()]
    _write("\n".join(blocks), output, fmt)


#: Mirrors ``analysis.turns.SR_DEFINITIONS`` (kept here so --help does not import pandas).
SR_DEFINITION_CHOICES = ("common_solved", "all_trajectories")


def _note_disagreements(frame: pd.DataFrame) -> None:
    """Say on stderr when the two success sources differ, so neither is read unknowingly."""
    if frame.empty:
        return
    both = frame["recorded_success"].notna() & frame["exact_match"].notna()
    differ = int((frame.loc[both, "recorded_success"].astype(bool)
                  != frame.loc[both, "exact_match"].astype(bool)).sum())
    unscored = int(frame["success"].isna().sum())
    if differ:
        click.echo(f"note: recorded and exact_match outcomes differ on {differ} trajectories "
                   "(see --success-source)", err=True)
    if unscored:
        click.echo(f"note: {unscored} unscored trajectories (no ground truth, no recorded "
                   "outcome) are left out", err=True)


@click.command("stats")
@click.argument("table", metavar="TABLE")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="md", show_default=True)
@click.option("--runs", default=None, help="Comma-separated run names (default: every run).")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="File to write (a directory for 'all' with csv/html/png); default stdout "
                   "(png needs a file).")
@click.option("--workspace", "workspace", type=click.Path(path_type=Path), default=None,
              help="Workspace directory (default: $FAILLAB_WORKSPACE, else ./workspace).")
@click.option("--taxonomy-version", default=None,
              help="Only labels of this taxonomy version (default: all).")
@click.option("--decimals", default=3, show_default=True, type=click.IntRange(0, 12),
              help="Decimal places for md and latex.")
@success_source_option
@click.option("--layout", type=click.Choice(("long", "paper")), default="long",
              show_default=True,
              help="passk only: 'paper' gives EHR-Complex Tables 22-26 (one row per model and "
                   "view, Pass^k from its T=0 run and Pass@k from its T=0.6 run).")
@click.option("--sr-definition", type=click.Choice(SR_DEFINITION_CHOICES),
              default=SR_DEFINITION_CHOICES[0], show_default=True,
              help="turn_budget only: 'common_solved' is the paper's SR(T) (tasks every "
                   "selected run solved; reaches 1); 'all_trajectories' divides by every "
                   "scored trajectory.")
@click.option("--offline-labellers", is_flag=True,
              help="labeller only: also the offline classifier's accuracy and kappa by "
                   "cross-validation (grouped by task) on the workspace's confirmed labels, "
                   "beside the heuristic, the evidence finder and the stored pre-labels "
                   "(Gemini, heuristic), as a second table 'labeller_offline'. Needs 10 "
                   "confirmed labels.")
@click.option("--calibration", is_flag=True,
              help="labeller only: also each labeller's calibration on the people-checked "
                   "items (heuristic, finder, classifier cross-validated, each LLM): items "
                   "checked, agreement, mean raw confidence and calibrated probability per "
                   "category, the calibration error (ECE) raw and calibrated, and the "
                   "reliability curve, as tables 'labeller_calibration' and "
                   "'labeller_reliability'. A labeller nobody checked shows its development-"
                   "set measurement (its prior).")
@click.option("--labels", "label_policy", type=click.Choice(("human-confirmed", "all")),
              default="human-confirmed", show_default=True,
              help="Labels the label tables count: human-confirmed (adjudicated, or given by "
                   "annotators), as the Statistics page's default, or all (LLM-only "
                   "pre-labels too). The provenance table always counts every label.")
def stats(table: str, fmt: str, runs: str | None, output: Path | None,
          workspace: Path | None, taxonomy_version: str | None, decimals: int,
          success_source: str, layout: str, sr_definition: str,
          offline_labellers: bool, calibration: bool, label_policy: str) -> None:
    """Print one analysis TABLE (or 'all'): success, passk, turns, turn_budget, taxonomy,
    taxonomy_corrected, taxonomy_turns, provenance, robustness, reliability, labeller.

    'labeller' compares the LLM pre-labels with the human final labels (kappa, per-category
    precision / recall and override rate). Label tables read the workspace's annotation store.
    Unscored trajectories (no ground truth, no recorded outcome) are left out of every table;
    when recorded and exact-match outcomes disagree, stderr says on how many trajectories.
    """
    from analysis.exports_paper import export_context
    from analysis.sources import (
        Inputs,
        SourceError,
        TableOptions,
        apply_verdicts,
        compute_table,
        final_labels,
        human_verdicts,
        labeller_pairs,
        load_frame,
        needs_labels,
    )
    from trajectories.workspace import Workspace

    choices = _table_choices()
    if table not in choices:
        raise UserError(f"unknown table {table!r}; choose one of {', '.join(choices)}")
    if fmt == "png" and output is None:
        raise UserError("--format png writes an image: give --output FILE.png (or a folder "
                        "for 'all')")
    if offline_labellers and table != "labeller":
        raise UserError("--offline-labellers goes with the 'labeller' table")
    if calibration and table != "labeller":
        raise UserError("--calibration goes with the 'labeller' table")
    if output is not None:
        # Two tables (all, or labeller with --offline-labellers) as csv/html: one file each.
        several = table == ALL or offline_labellers or calibration
        many = several and fmt in _ONE_FILE_EACH
        fmt = check_output(output, settings_for(workspace), fmt, directory=many,
                           suffixes=None if several else _OUTPUT_SUFFIXES)
    run_list = _split_runs(runs)
    ws = Workspace.from_settings(settings_for(workspace))
    if not ws.exists():
        raise UserError(
            f"no workspace at {ws.root}: import trajectories ('faillab import') "
            "or build the demo ('faillab demo')"
        )
    names = [n for n in choices if n != ALL] if table == ALL else [table]
    try:
        if run_list is not None:
            from analysis.sources import check_runs

            check_runs(ws, run_list)
        inputs = Inputs(load_frame(ws, run_list, success_source))
        store = open_store(workspace)
        if store is not None:
            try:
                # People's verdicts win over the recorded and judged outcomes (docs/scoring.md).
                frame = apply_verdicts(inputs.frame, human_verdicts(store), success_source)
                inputs = Inputs(frame)
                if needs_labels(names):
                    every = final_labels(store, taxonomy_version)
                    inputs = Inputs(frame, every, labeller_pairs(store, taxonomy_version))
            finally:
                store.close()
        # One registry computes every table: it applies the label policy (provenance counts
        # every label, so the share left out stays visible) and the layout and SR(T) options,
        # exactly as the Statistics page passes them.
        options = TableOptions(tuple(run_list) if run_list is not None else None,
                               label_policy, "paper" if layout == "paper" else "long",
                               sr_definition)
        tables = {n: compute_table(n, inputs, run_list, options) for n in names}
    except SourceError as err:
        raise UserError(str(err)) from None

    def context(name: str) -> ExportContext:
        # The page builds the same context from its selection (analysis.exports_paper).
        return export_context(name, inputs.frame, options, decimals=decimals)

    if offline_labellers or calibration:
        if offline_labellers:
            tables["labeller_offline"] = _offline_labellers(ws, workspace, taxonomy_version)
        if calibration:
            tables.update(_calibration(ws, workspace, taxonomy_version))
        _emit_all(tables, fmt, output, context)
        _note_disagreements(inputs.frame)
        _note_label_policy(names, options)
        return

    if table == ALL:
        _emit_all(tables, fmt, output, context)
    else:
        data = _file(table, tables[table], fmt, context(table))
        if fmt == "png" and output is not None:
            _write_png(data, output)
            click.echo(f"wrote {output}", err=True)
        else:
            _write(data.decode("utf-8"), output, fmt)
    _note_disagreements(inputs.frame)
    _note_label_policy(names, options)


def _note_label_policy(names: list[str], options: TableOptions) -> None:
    """Every output with a table the label policy applies to says which labels it counts
    (stderr), in the registry's words."""
    from analysis.sources import STATISTICS, label_policy_line

    if any(STATISTICS[n].counts_labels_by_policy for n in names):
        click.echo(f"note: {label_policy_line(options)}", err=True)


def _offline_labellers(ws: Workspace, workspace: Path | None,
                       taxonomy_version: str | None) -> pd.DataFrame:
    """The classifier cross-validated on the confirmed labels, with the other labellers' figures
    on the same items (computed in opinions.learn; analysis only lays them out)."""
    from analysis.labeller import offline_comparison
    from opinions.clusters.embed import TfidfEmbedder
    from opinions.learn.confirmed import MIN_CONFIRMED, evaluate_confirmed

    store = open_store(workspace)
    if store is None:
        raise UserError("no annotation store yet: confirm some labels on the Annotate page")
    try:
        figures = evaluate_confirmed(ws, store, TfidfEmbedder(), ehr_path=ws.ehr_path,
                                     taxonomy_version=taxonomy_version)
    except ValueError as err:
        raise UserError(f"{err}; the classifier needs at least {MIN_CONFIRMED}") from None
    finally:
        store.close()
    return offline_comparison(figures)


def _calibration(ws: Workspace, workspace: Path | None,
                 taxonomy_version: str | None) -> dict[str, pd.DataFrame]:
    """Each labeller's calibration on the workspace's people-checked items (computed in
    opinions.learn; analysis only lays it out)."""
    from analysis.calibration import calibration_tables
    from opinions.learn.calibration_store import (
        calibration_report,
        classifier_observations,
        workspace_observations,
    )

    store = open_store(workspace)
    if store is None:
        observations = []
    else:
        try:
            observations = [*workspace_observations(store, taxonomy_version),
                            *classifier_observations(ws, store, taxonomy_version)]
        finally:
            store.close()
    summary, curve = calibration_report(observations)
    table, bins = calibration_tables(summary, curve)
    return {"labeller_calibration": table, "labeller_reliability": bins}


__all__ = ["FORMATS", "stats"]
