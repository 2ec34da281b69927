"""``faillab show``: one trajectory as readable text, for a researcher at a terminal.

Everything printed comes from imported files (questions, SQL, observations, answers), so every
line goes through :func:`faillab_core.textsafe.terminal_text`: an observation holding escape
sequences must not recolour, retitle or rewrite the reader's terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from faillab.cli.common import (
    echo_text,
    emit,
    json_option,
    open_workspace,
    people_verdicts,
    success_source_option,
    workspace_option,
)

if TYPE_CHECKING:
    from trajectories.model import Step, Trajectory

#: Exit status of an unknown id: distinct from a user error (1) so scripts can tell them apart.
NOT_FOUND = 2

_OUTCOME_WORDS = {"success": "SUCCESS", "failure": "FAILURE", "unscored": "UNKNOWN"}


def _value_text(value: Any) -> str:
    """An answer or ground truth as compact JSON (strings stay quoted, so "" is visible)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _cut(text: str, max_chars: int) -> str:
    """``text`` shortened to ``max_chars`` with a note saying how much was left out."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n... [{len(text) - max_chars} more characters cut]"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines()) if text else prefix


def _step_body(step: Step) -> str:
    """What the agent did in one step: its code, tool call or message text."""
    if step.code is not None:
        return step.code
    if step.name is not None or step.arguments is not None:
        return f"{step.name or '?'}({step.arguments or ''})"
    return step.content or ""


def _step_lines(index: int, step: Step, max_chars: int) -> list[str]:
    head = f"[{index}] {step.kind.value}"
    if step.role != "assistant":
        head += f" ({step.role})"
    if step.kind.value == "tool_call" and step.name:
        head += f" {step.name}"
    if step.error:
        head += "  ERROR"
    lines = [head, _indent(_step_body(step))]
    if step.content and step.code is not None:
        # A SQL/Python step that also carries text (the model's remark alongside the call).
        lines += ["  said:", _indent(step.content)]
    if step.observation is not None:
        label = "  error:" if step.error else "  observation:"
        lines += [label, _indent(_cut(step.observation, max_chars))]
    return lines


def render(traj: Trajectory, outcome: str, max_chars: int) -> str:
    """The whole trajectory as plain text (not yet made terminal-safe)."""
    task, run = traj.task, traj.run
    lines = [
        f"trajectory {traj.id}",
        f"run {run.name}  model {run.model}  rollout {run.rollout}",
        f"task {task.id}  intent {task.intent}" + (f"  scope {task.scope}" if task.scope else ""),
        "",
        "QUESTION",
        _indent(task.question),
    ]
    if task.answer_format:
        lines += ["ANSWER FORMAT", _indent(task.answer_format)]
    lines += ["", f"STEPS ({len(traj.steps)})"]
    for i, step in enumerate(traj.steps):
        lines += _step_lines(i, step, max_chars)
    lines += ["", "FINAL ANSWER", _indent(_value_text(traj.final_answer)), "GROUND TRUTH"]
    lines.append(_indent(_value_text(task.ground_truth) if task.has_ground_truth
                         else "(none recorded)"))
    if not task.has_ground_truth:
        # Nothing to compare the answer with: never shown as a success, whatever the producer
        # claimed; its verdict is shown as what it is.
        recorded = traj.outcome.success if traj.outcome else None
        lines.append("OUTCOME UNKNOWN  (no ground truth to compare the answer with)")
        if recorded is not None:
            lines.append(f"  the producer recorded: {'success' if recorded else 'failure'}")
    else:
        lines.append(f"OUTCOME {_OUTCOME_WORDS[outcome]}")
    lines += ["", "REFERENCE SQL", _indent(task.reference_sql or "(none)")]
    return "\n".join(lines)


@click.command("show")
@click.argument("trajectory_id")
@workspace_option
@click.option("--max-chars", default=2000, show_default=True, type=click.IntRange(min=0),
              help="Longest observation printed in full; longer ones are cut with a note "
                   "(0: never cut).")
@success_source_option
@json_option
def show(trajectory_id: str, workspace: Path | None, max_chars: int, success_source: str,
         as_json: bool) -> None:
    """Print one trajectory: question, every step with its observation, final answer vs
    ground truth, outcome and reference SQL."""
    from trajectories.outcome import outcome_name

    ws = open_workspace(workspace)
    traj = ws.get(trajectory_id) if ws.exists() else None
    if traj is None:
        echo_text(f"error: no trajectory with id {trajectory_id!r} in {ws.root}", err=True)
        raise SystemExit(NOT_FOUND)
    if as_json:
        emit(traj.model_dump(mode="json"))
        return
    found = ws.list(success_source=success_source, people=people_verdicts(workspace),
                    ids=[trajectory_id])
    success = found[0]["success"] if found else None
    echo_text(render(traj, outcome_name(success), max_chars))
