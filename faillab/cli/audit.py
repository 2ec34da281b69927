"""``faillab audit``: the human validity audit of benchmark tasks.

create -> (people review in the workbench, or import-judgments) -> report. Every sub-command
works on the annotation store named by the settings; ``--audit`` defaults to the newest audit
not archived.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from faillab.cli.common import (
    UserError,
    check_output,
    echo_text,
    emit,
    json_option,
    settings_for,
    workspace_option,
    write_output,
)
from labeling.store import Store

#: Report formats an ``--output`` extension implies.
REPORT_SUFFIXES = {".json": "json", ".csv": "csv", ".md": "md", ".tex": "latex"}


def _store(workspace: Path | None) -> Store:
    from labeling.store import open_store

    settings = settings_for(workspace)
    if not settings.database_url:
        # The default store is a SQLite file inside the workspace directory.
        settings.workspace.mkdir(parents=True, exist_ok=True)
    return open_store(settings.annotations_url())


def _audit_name(store: Store, audit: str | None) -> str:
    from labeling.audit import latest_audit

    if audit:
        if audit not in {name for name, _ in store.audits.all()}:
            raise UserError(f"unknown audit {audit!r} (see 'faillab audit list')")
        return audit
    name = latest_audit(store)
    if name is None:
        raise UserError("no audit yet: create one with 'faillab audit create'")
    return name


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


audit_option = click.option("--audit", "audit", default=None,
                            help="Audit name (default: the most recent audit not archived).")


@click.group()
def audit() -> None:
    """Human validity audit of tasks no selected run solved."""


@audit.command("create")
@workspace_option
@click.option("--runs", default=None,
              help="Comma-separated runs whose unsolved tasks form the pool (default: all).")
@click.option("--n", "n", default=500, show_default=True, type=int, help="Sample size.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--annotators", default=None,
              help="Comma-separated reviewers; each item goes to --per-item of them.")
@click.option("--per-item", default=2, show_default=True, type=int,
              help="Reviewers per item (at least 2).")
@click.option("--name", default=None, help="Audit name (default: audit-<UTC time>).")
@json_option
def create_cmd(workspace: Path | None, runs: str | None, n: int, seed: int,
               annotators: str | None, per_item: int, name: str | None, as_json: bool) -> None:
    """Sample tasks unsolved by the selected runs, stratified over intent x scope."""
    from labeling.audit import (
        AuditError,
        candidate_pool,
        create_audit,
        default_audit_name,
        plan_audit,
    )
    from labeling.store import StoreError
    from trajectories.workspace import Workspace

    ws = Workspace.from_settings(settings_for(workspace))
    try:
        store = _store(workspace)
        # People's verdicts win: a task a person judged solved is no candidate.
        plan = plan_audit(candidate_pool(ws, _split(runs) or None,
                                         store.verdicts.effective()), n=n, seed=seed)
        audit_name = name or default_audit_name()
        definition = create_audit(store, plan, name=audit_name,
                                  annotators=_split(annotators), per_item=per_item)
    except (AuditError, StoreError) as err:
        raise UserError(str(err)) from None
    if as_json:
        emit({"audit": audit_name, **definition})
        return
    click.echo(f"audit {audit_name}")
    click.echo(f"candidate pool: {plan.pool.n_candidates:,} / {plan.pool.n_total_tasks:,} tasks "
               f"({_pct(plan.pool.share)}) unsolved by {len(plan.pool.runs)} run(s)")
    click.echo(f"sample: {plan.sample.n_selected:,} tasks, "
               f"{plan.sample.n_unique_templates:,} distinct templates (seed {seed})")
    for s in plan.strata():
        click.echo(f"  {s['intent'] or '-'} / {s['scope'] or '-'}: "
                   f"{s['allocated']} of {s['population']}")
    people = definition["annotators"]
    click.echo(f"annotators: {', '.join(people)} ({definition['per_item']} per item)"
               if people else "annotators: open (anyone signed in reviews any item)")


@audit.command("report")
@workspace_option
@audit_option
@click.option("--format", "fmt", type=click.Choice(["json", "csv", "md", "latex"]),
              default="md", show_default=True)
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="Write to this file instead of stdout.")
def report_cmd(workspace: Path | None, audit: str | None, fmt: str,
               output: Path | None) -> None:
    """The validity summary (Table-11 style), agreement by stratum, reasons."""
    import json

    from analysis.audit_report import to_csv, to_json_dict, to_latex, to_markdown
    from labeling.audit import AuditError, audit_report

    if output is not None:
        fmt = check_output(output, settings_for(workspace), fmt, suffixes=REPORT_SUFFIXES)
    store = _store(workspace)
    name = _audit_name(store, audit)
    try:
        report = audit_report(store, name)
    except AuditError as err:
        raise UserError(str(err)) from None
    if fmt == "json":
        text = json.dumps({"audit": name, **to_json_dict(report)}, ensure_ascii=False)
    elif fmt == "csv":
        text = to_csv(report)
    elif fmt == "md":
        text = to_markdown(report)
    else:
        text = to_latex(report)
    if output is not None:
        write_output(output, text if text.endswith("\n") else text + "\n")
        click.echo(f"wrote {output}", err=True)
    elif fmt in ("md", "latex"):
        echo_text(text.rstrip("\n"))
    else:
        click.echo(text.rstrip("\n"))


@audit.command("import-judgments")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@workspace_option
@audit_option
@json_option
def import_cmd(file: Path, workspace: Path | None, audit: str | None, as_json: bool) -> None:
    """Import judgments (CSV or JSONL: task_id, annotator, valid, reason, note, stage).

    When --audit names an audit that does not exist yet, it is created from the file (its
    items are the file's tasks; no workspace sample, so its report has no candidate share).
    All or nothing: a bad row stops the import with its row number and nothing is stored.
    """
    from labeling.audit import imported_audit_definition
    from labeling.store import StoreError, import_audit_judgments

    store = _store(workspace)
    create = None
    if audit and audit.strip() and audit not in {n for n, _ in store.audits.all()}:
        name, create = audit, imported_audit_definition(file.name)
    else:
        name = _audit_name(store, audit)
    try:
        count = import_audit_judgments(store, file, name, create=create)
    except StoreError as err:
        raise UserError(f"{file.name}: {err} (nothing was imported)") from None
    except UnicodeDecodeError:
        raise UserError(f"{file.name}: not UTF-8 text (nothing was imported)") from None
    if as_json:
        emit({"audit": name, "imported": count, "created": create is not None})
    elif create is not None:
        click.echo(f"created audit {name} from {file.name}: imported {count} judgment(s)")
    else:
        click.echo(f"imported {count} judgment(s) into audit {name}")


@audit.command("list")
@workspace_option
@json_option
def list_cmd(workspace: Path | None, as_json: bool) -> None:
    """Audits in creation order with their pool and sample sizes."""
    store = _store(workspace)
    archived = store.audits.archived()
    rows: list[dict[str, Any]] = []
    for name, definition in store.audits.all():
        when = archived.get(name)
        rows.append({
            "audit": name,
            "runs": definition.get("runs"),
            "pool_size": definition.get("pool_size"),
            "total_tasks": definition.get("total_tasks"),
            "sample_size": definition.get("sample_size"),
            "seed": definition.get("seed"),
            "annotators": definition.get("annotators"),
            "items": len(store.audits.items(name)),
            "archived_at": when.isoformat(timespec="seconds") if when else None,
        })
    if as_json:
        emit(rows)
        return
    if not rows:
        click.echo("no audits yet")
    for r in rows:
        mark = " (archived)" if r["archived_at"] else ""
        if r["pool_size"] is None:  # created from a judgments file: no workspace sample
            click.echo(f"{r['audit']}{mark}: {r['items']:,} items imported from a judgments file")
            continue
        click.echo(f"{r['audit']}{mark}: {r['items']:,} items from a pool of "
                   f"{r['pool_size']:,} / {r['total_tasks']:,} tasks, seed {r['seed']}")


@audit.command("archive")
@click.argument("name")
@click.option("--restore", is_flag=True,
              help="Bring an archived audit back into use instead.")
@workspace_option
@json_option
def archive_cmd(name: str, restore: bool, workspace: Path | None, as_json: bool) -> None:
    """Archive audit NAME: it keeps every judgment but is no longer anyone's default.

    Pages and commands default to the newest audit not archived, so archive an audit created
    by mistake rather than leaving it the default everywhere.
    """
    from labeling.store import StoreError

    store = _store(workspace)
    try:
        store.audits.archive(name, actor=None, archived=not restore)
    except StoreError as err:
        raise UserError(str(err)) from None
    if as_json:
        emit({"audit": name, "archived": not restore})
    else:
        click.echo(f"{'restored' if restore else 'archived'} audit {name}")
