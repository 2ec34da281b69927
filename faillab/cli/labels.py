"""``faillab labels``: failure labels in and out of the annotation store (CSV or JSONL)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import click

from faillab.cli.common import (
    UserError,
    check_output,
    open_workspace,
    settings_for,
    workspace_option,
    write_output,
)
from faillab.cli.users import open_annotations
from faillab_core.textsafe import csv_text, csv_uncell
from labeling.store import DataImportError, StoreError, export_labels, import_labels
from taxonomy import Taxonomy, default_taxonomy
from trajectories import columns as col

_CATEGORY_FIELDS = ("category", "secondary_category")
_LABEL_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json"}


def _to_key(taxonomy: Taxonomy, value: object) -> object:
    # Names ("SQL Logic Error") become keys; anything unknown is left for the importer to
    # reject with its row number.
    if isinstance(value, str) and value.strip() and value.strip() in taxonomy:
        return taxonomy.category(value.strip()).key
    return value


def normalise_categories(text: str, suffix: str, taxonomy: Taxonomy) -> str:
    """The file's text with category names replaced by keys, in the same format.

    The store's importer validates against an exact set of keys; people often write the
    display names, so those are mapped first. CSV cells an export neutralised against
    formula injection (a leading ``'`` before ``= + - @``, tab, CR or LF, or before such a
    quoted cell) lose that one quote.
    Rows this cannot parse are passed through unchanged, so the importer's own error (with
    its row number) is what the user sees.
    """
    if suffix in (".jsonl", ".ndjson") or (suffix != ".csv" and text.lstrip().startswith("{")):
        lines = []
        for line in text.splitlines():
            try:
                obj = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:
                obj = None
            if isinstance(obj, dict):
                for f in _CATEGORY_FIELDS:
                    if f in obj:
                        obj[f] = _to_key(taxonomy, obj[f])
                line = json.dumps(obj, ensure_ascii=False)
            lines.append(line)
        return "\n".join(lines) + "\n"
    reader = csv.reader(io.StringIO(text))
    rows = list(reader)
    if not rows:
        return text
    header = [h.strip() for h in rows[0]]
    positions = [header.index(f) for f in _CATEGORY_FIELDS if f in header]
    for row in rows[1:]:
        # Cells our exports neutralised against formula injection ('=...) read back as typed.
        row[:] = [csv_uncell(cell) for cell in row]
        for i in positions:
            if i < len(row):
                row[i] = str(_to_key(taxonomy, row[i]))
    return csv_text(rows)


@click.group()
def labels() -> None:
    """Export and import failure labels."""


@labels.command("export")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "json"]), default="csv",
              show_default=True,
              help="Output format; with --output the file's extension (.csv, .jsonl, .json) "
                   "decides when --format is not given.")
@click.option("--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="File to write (default: standard output). Never the label store or a file "
                   "inside the workspace; a missing parent folder is created.")
@click.option("--prelabels/--no-prelabels", default=True, show_default=True,
              help="Also export the LLM/heuristic pre-labels (source llm).")
@click.option("--history/--no-history", default=True, show_default=True,
              help="Also export superseded and retracted (undone) labels; --no-history: only "
                   "the labels that count now.")
@workspace_option
def export_cmd(fmt: str, output: Path | None, prelabels: bool, history: bool,
               workspace: Path | None) -> None:
    """Every stored label, oldest first, then the pre-labels.

    The history is included: a label replaced by its annotator has `superseded_by` (the
    `label_id` of the one that replaced it), a label undone has `retracted_at` and
    `retracted_by`; importing the file keeps them retracted. CSV text cells that a
    spreadsheet would run as a formula (starting with = + - @, tab, carriage return or line
    feed) get a leading single quote, which `labels import` removes again.
    """
    if output is not None:
        fmt = check_output(output, settings_for(workspace), fmt, suffixes=_LABEL_SUFFIXES)
    store = open_annotations(workspace)
    try:
        text = export_labels(store, "jsonl" if fmt == "json" else fmt,
                             include_prelabels=prelabels, include_history=history)
    finally:
        store.close()
    if fmt == "json":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        text = json.dumps(records, ensure_ascii=False, indent=1) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        write_output(output, text)
        click.echo(f"wrote {output}", err=True)


@labels.command("import")
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@workspace_option
def import_cmd(path: Path, workspace: Path | None) -> None:
    """Import labels from CSV or JSONL; a bad row stops the import and nothing is stored.

    Trajectory ids must exist in the workspace; categories are keys or names of the default
    taxonomy. Annotators the store does not know are created as annotators.
    """
    taxonomy = default_taxonomy()
    ws = open_workspace(workspace)
    known = (set(ws.query_df(f"SELECT {col.ID} FROM {col.TRAJECTORIES}")[col.ID])
             if ws.part_files() else set())
    try:
        # newline="": line breaks inside quoted fields are kept as written.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read ({err})") from None
    text = normalise_categories(text, path.suffix.lower(), taxonomy)
    store = open_annotations(workspace)
    try:
        n = import_labels(store, text, known_trajectory_ids=known,
                          default_taxonomy_version=taxonomy.version)
    except DataImportError as err:
        raise UserError(f"{path}: {err} (nothing was imported)") from None
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        store.close()
    click.echo(f"imported {n} label(s) from {path}")
