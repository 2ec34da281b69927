"""``faillab verdicts``: judge every trajectory again, record a person's verdict, and report how
far the automatic verdicts agree with people's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from faillab.cli.common import UserError, emit, json_option, open_workspace, workspace_option
from faillab_core.textsafe import terminal_text
from llm import backend_names

#: The scoring profiles (``trajectories.judge.Profile``), named here so ``--help`` imports no
#: judge.
PROFILE_NAMES = ("default", "ehrsql-2024", "robustgym", "ehr-complex")

if TYPE_CHECKING:
    from opinions.verdict_llm import LLMJudge
    from trajectories.workspace import Workspace


@click.group()
def verdicts() -> None:
    """Did the agent fail? The judge's verdicts, people's verdicts and their agreement."""


@verdicts.command("judge")
@workspace_option
@click.option("--rerun-sql", is_flag=True,
              help="Re-execute, read-only in the sandbox at the task's reference time, a last "
                   "SQL query whose recorded result was cut or unreadable; under the "
                   "ehrsql-2024 profile every prediction and gold query (needs the workspace's "
                   "EHR database).")
@click.option("--profile", type=click.Choice(PROFILE_NAMES), default=None,
              help="Judge every trajectory under this scoring profile (default: each task's "
                   "own, else 'default'; docs/scoring.md lists each profile's rules).")
@click.option("--llm", "llm_backend", type=click.Choice(backend_names()),
              default=None,
              help="Then ask an LLM about what the rules leave undecided (off by default; "
                   "openai-compatible: any server at FAILLAB_OPENAI_BASE_URL, e.g. vLLM, "
                   "Ollama or LM Studio on your own machines).")
@click.option("--model", default=None, help="The LLM's model (default: from the settings).")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Ask the LLM about at most this many trajectories.")
@click.option("--yes-send-data", is_flag=True,
              help="Acknowledge sending questions and answers to an LLM service that is not "
                   "one of your own addresses (MIMIC-derived data: zero-retention only).")
@json_option
def judge_cmd(workspace: Path | None, rerun_sql: bool, profile: str | None,
              llm_backend: str | None,
              model: str | None, limit: int | None, yes_send_data: bool,
              as_json: bool) -> None:
    """Judge every trajectory with the current rules (and exact match) into the workspace's
    overlay; stored trajectories are never rewritten. With --llm, what the rules cannot decide
    is asked of an LLM (method 'llm', its rationale as evidence); what it cannot decide
    either stays undecided for people."""
    from faillab.cli.common import settings_for
    from trajectories.judge import Executor, sandbox_executor

    ws = open_workspace(workspace)
    if not ws.exists():
        raise UserError(f"no workspace at {ws.root}: import trajectories first")
    execute: Executor | None = None
    if rerun_sql:
        settings = settings_for(workspace)
        path = ws.ehr_path
        if path is None or not path.is_file():
            raise UserError("--rerun-sql needs the workspace's EHR database ('faillab sandbox "
                            "use FILE')")
        # A query the sandbox refuses or stops decides nothing; under ehrsql-2024 a failing
        # prediction is a wrong answer, as the benchmark's scorer counts it.
        from trajectories.sql import workspace_reference_time

        execute = sandbox_executor(path, timeout_s=settings.sql_timeout_s,
                                   default_now=workspace_reference_time(ws.read_settings()))

    judge = None
    if llm_backend is not None:
        judge = _llm_judge(workspace, llm_backend, model, yes_send_data)
    result: dict[str, object] = dict(ws.overlay.write_scores(profile=profile, execute=execute))
    result["profile"] = profile or "each task's own"
    if judge is not None:
        result["llm"] = _ask_llm(ws, judge, limit)
    if as_json:
        emit(result)
        return
    click.echo(f"judged {result['scored']} trajectories (profile: {result['profile']}): "
               f"{result['correct']} correct, {result['incorrect']} incorrect, "
               f"{result['undecided']} undecided ({result['changed']} exact-match outcomes "
               "changed)")
    if result.get("kept"):
        click.echo(f"kept {result['kept']} earlier LLM verdicts the rules still cannot decide")
    llm = result.get("llm")
    if isinstance(llm, dict):
        click.echo(f"LLM: asked about {llm['asked']}, {llm['recorded']} decided, "
                   f"{llm['undecided']} left to people")
        for line in llm["errors"][:20]:
            click.echo(f"failed: {terminal_text(line)}", err=True)


def _llm_judge(workspace: Path | None, backend: str, model: str | None,
               yes_send_data: bool) -> LLMJudge:
    """The LLM judge, built before any rule runs so a missing key fails first; its privacy
    notice goes to stderr."""
    from faillab.cli.common import settings_for
    from opinions.prelabel.run_errors import PrelabelServiceError
    from opinions.verdict_llm import make_llm_judge

    try:
        judge = make_llm_judge(settings_for(workspace), backend, model=model,
                               allow_external=yes_send_data)
    except PrelabelServiceError as err:
        raise UserError(str(err)) from None
    click.echo(f"privacy: {judge.privacy_notice}", err=True)
    return judge


def _ask_llm(ws: Workspace, judge: LLMJudge, limit: int | None) -> dict[str, object]:
    from opinions.llm_verdicts import judge_undecided
    from opinions.prelabel.run_errors import PrelabelServiceError
    from opinions.verdict_llm import JudgeAborted

    try:
        run = judge_undecided(ws, judge, limit=limit)
    except JudgeAborted as err:
        raise UserError(f"{err} (what was answered before is kept)") from None
    except PrelabelServiceError as err:
        raise UserError(str(err)) from None
    out = run.as_json()
    out["input_tokens"] = judge.stats.input_tokens
    out["output_tokens"] = judge.stats.output_tokens
    out["estimated_cost_usd"] = round(judge.stats.estimated_cost_usd, 6)
    return out


@verdicts.command("report")
@workspace_option
@click.option("--limit", default=20, show_default=True,
              help="Disagreements listed in the text report.")
@click.option("--against", "against", default=None,
              type=click.Path(path_type=Path, dir_okay=False),
              help="Compare with these per-question reference verdicts instead of people's: "
                   "a JSON object of id -> verdict or score (an official scorer's per-question "
                   "output: 1 right, 0 or -1 not), or a CSV/JSON table with an id and a "
                   "verdict column; ids are trajectory ids or task ids.")
@click.option("--run", default=None, help="With --against: match task ids in this run only.")
@json_option
def report_cmd(workspace: Path | None, limit: int, against: Path | None, run: str | None,
               as_json: bool) -> None:
    """Agreement of the automatic verdicts with people's (or with a reference file's):
    accuracy, Cohen's kappa with its 95% interval, the confusion table, figures by method and
    scoring profile, and each disagreement."""
    from analysis.verdicts import report_text, verdict_frame, verdict_report
    from faillab.cli.stats import open_store

    ws = open_workspace(workspace)
    if against is not None:
        _report_against(ws, against, run, limit, as_json)
        return
    store = open_store(workspace)
    try:
        people = store.verdicts.effective() if store is not None else {}
    finally:
        if store is not None:
            store.close()
    report = verdict_report(verdict_frame(ws, people))
    if as_json:
        emit(report.as_json())
        return
    click.echo(terminal_text(report_text(report, limit=limit)))


def _report_against(ws: Workspace, path: Path, run: str | None, limit: int,
                    as_json: bool) -> None:
    import dataclasses

    from analysis.verdicts import (
        ReferenceFileError,
        against_frame,
        read_reference,
        report_text,
        verdict_report,
    )

    try:
        reference = read_reference(path)
    except ReferenceFileError as err:
        raise UserError(str(err)) from None
    matched = against_frame(ws, reference, run)
    report = dataclasses.replace(verdict_report(matched.rows), against=path.name)
    left_out = {"unmatched": matched.unmatched, "ambiguous": matched.ambiguous,
                "unreadable": matched.unreadable}
    if as_json:
        emit({**report.as_json(), "reference_entries": len(reference),
              **{f"{k}_ids": v for k, v in left_out.items()}})
        return
    click.echo(terminal_text(report_text(report, limit=limit)))
    for what, ids in left_out.items():
        if ids:
            why = {"unmatched": "name no trajectory", "ambiguous": "name a task of several "
                   "trajectories (--run picks one run)", "unreadable": "say neither right "
                   "nor wrong"}[what]
            click.echo(f"left out {len(ids)} reference entries that {why}: "
                       + terminal_text(", ".join(ids[:5])) + (" ..." if len(ids) > 5 else ""))


@verdicts.command("set")
@click.argument("trajectory_id")
@click.argument("verdict", type=click.Choice(["correct", "incorrect"]))
@click.option("--as", "annotator", required=True, help="Who gives the verdict (a user).")
@click.option("--note", default=None)
@workspace_option
def set_cmd(trajectory_id: str, verdict: str, annotator: str, note: str | None,
            workspace: Path | None) -> None:
    """Record a person's verdict on one trajectory: the agent was right (correct) or failed
    (incorrect). It wins over the recorded and the judged outcome."""
    from faillab.cli.users import open_annotations
    from labeling.store import StoreError

    ws = open_workspace(workspace)
    if ws.get(trajectory_id) is None:
        raise UserError(f"no trajectory {trajectory_id!r} in {ws.root}")
    store = open_annotations(workspace)
    try:
        store.verdicts.record(trajectory_id, verdict, annotator, note=note)
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        store.close()
    click.echo(f"{terminal_text(annotator)}: {trajectory_id} is {verdict}")
