"""``faillab verdicts``: the report's figures against an independent computation, people's
verdicts winning in the statistics, and re-judging into the overlay."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.metrics import cohen_kappa_score

from analysis.verdicts import is_person_source, verdict_frame, verdict_report
from faillab.cli import main
from tests.support import CLAUDE_ANSWERS, LMSTUDIO_SAMPLE, require_shared
from trajectories.workspace import Workspace


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def imported(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    code, _, err = invoke("import", str(require_shared(CLAUDE_ANSWERS)), "--workspace", str(ws))
    assert code == 0, err
    code, _, err = invoke("import", str(require_shared(LMSTUDIO_SAMPLE)), "--tasks",
                          str(LMSTUDIO_SAMPLE / "EHRSQL_benchmark.csv"), "--workspace", str(ws))
    assert code == 0, err
    return ws


def test_the_report_agrees_with_an_independent_kappa(tmp_path: Path) -> None:
    ws = imported(tmp_path)
    code, out, err = invoke("verdicts", "report", "--workspace", str(ws), "--json")
    assert code == 0, err
    report = json.loads(out)
    frame = Workspace(ws).frame()
    assert report["n"] == 110  # every trajectory carries a human verdict from its file
    people = frame["recorded_success"].map({True: "correct", False: "incorrect"})
    judge = frame["judge_verdict"]
    decided = judge != "undecided"
    assert report["agree"] == int((people == judge).sum())
    assert report["undecided"] == int((~decided).sum())
    expected = cohen_kappa_score(people[decided], judge[decided])
    assert abs(report["kappa"]["kappa"] - expected) < 1e-9
    assert report["kappa"]["ci_low"] <= report["kappa"]["kappa"] <= report["kappa"]["ci_high"]
    assert sum(sum(row.values()) for row in report["confusion"].values()) == 110
    assert len(report["disagreements"]) == 110 - report["agree"]
    assert all(d["evidence"] for d in report["disagreements"])
    code, text, _ = invoke("verdicts", "report", "--workspace", str(ws))
    assert "Cohen's kappa" in text and "by method:" in text


def test_a_persons_verdict_wins_in_the_statistics_and_the_report(tmp_path: Path) -> None:
    ws = imported(tmp_path)
    workspace = Workspace(ws)
    undecided = workspace.query_df(
        "SELECT id, run FROM trajectories WHERE judge_verdict = 'undecided' AND "
        "run = 'm3-claude-sonnet-4' ORDER BY id LIMIT 1")
    tid = str(undecided["id"].iloc[0])

    def claude_rate() -> float:
        code, out, err = invoke("stats", "success", "--format", "json", "--workspace", str(ws),
                                "--runs", "m3-claude-sonnet-4")
        assert code == 0, err
        return float(json.loads(out)[0]["overall"])

    before = claude_rate()
    assert invoke("users", "add", "ana", "--no-password", "--workspace", str(ws))[0] == 0
    code, _, err = invoke("verdicts", "set", tid, "incorrect", "--as", "ana", "--workspace",
                          str(ws))
    assert code == 0, err
    # The recorded human verdict from the file said 'correct'; the person in the store wins.
    after = claude_rate()
    assert after != before
    frame = verdict_frame(workspace, {tid: False})
    assert bool(frame.loc[frame["id"] == tid, "human"].iloc[0]) is False
    assert frame.loc[frame["id"] == tid, "human_source"].iloc[0] == "store"


def test_judge_rewrites_the_overlay_and_keeps_the_trajectories(tmp_path: Path) -> None:
    ws = imported(tmp_path)
    parts = sorted(p.name for p in Workspace(ws).part_files())
    code, out, err = invoke("verdicts", "judge", "--workspace", str(ws), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["scored"] == 110
    assert result["correct"] + result["incorrect"] + result["undecided"] == 110
    assert sorted(p.name for p in Workspace(ws).part_files()) == parts
    code, _, err = invoke("verdicts", "judge", "--rerun-sql", "--workspace", str(ws))
    assert code == 1 and "EHR database" in err


def test_person_sources() -> None:
    assert is_person_source("human") and is_person_source("human:ana")
    assert not is_person_source("reward") and not is_person_source(None)


def test_an_empty_report_says_what_to_do(tmp_path: Path) -> None:
    Workspace(tmp_path / "ws").create()
    report = verdict_report(verdict_frame(Workspace(tmp_path / "ws")))
    assert report.n == 0 and report.kappa is None
    code, out, _ = invoke("verdicts", "report", "--workspace", str(tmp_path / "ws"))
    assert code == 0 and "No trajectory has a person's verdict yet" in out
    assert isinstance(report.confusion, pd.DataFrame)


def _undecided_by_rules(tmp_path: Path) -> Path:
    """A workspace of answers the rules cannot decide (and one they can), no harness reward."""
    from tests.support import make_trajectory
    from trajectories.model import Task

    def task(tid: str, question: str, gold: object) -> Task:
        return Task(id=tid, question=question, ground_truth=gold)

    rows = [
        make_trajectory(task=task("t-yes", "Did patient 1 have a lab test?", [[1]]),
                        final_answer="The records show several entries."),
        make_trajectory(task=task("t-stay", "How long was the stay in days?", [["24.983"]]),
                        final_answer="The stay lasted 24.9 days."),
        make_trajectory(task=task("t-count", "How many patients are there?", [[52]]),
                        final_answer="There are 52 patients."),
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in rows))
    ws = tmp_path / "ws"
    code, _, err = invoke("import", str(path), "--workspace", str(ws))
    assert code == 0, err
    return ws


def test_the_llm_decides_what_the_rules_leave_undecided(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fake_openai import FakeOpenAI, fenced, prompt_text

    ws = _undecided_by_rules(tmp_path)
    verdict_for = {"Did patient 1 have a lab test?": "correct",
                   "How long was the stay in days?": "undecided"}

    def answer(body: dict[str, object]) -> dict[str, str]:
        question = (fenced(prompt_text(body), "question") or "").strip()
        return {"verdict": verdict_for[question], "rationale": f"read {question!r}"}

    with FakeOpenAI(answer=answer) as fake:
        monkeypatch.setenv("FAILLAB_OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("FAILLAB_OPENAI_MODEL", "judge-model")
        code, out, err = invoke("verdicts", "judge", "--llm", "openai-compatible",
                                "--workspace", str(ws), "--json")
        assert code == 0, err
        asked = len(fake.requests)
        assert "privacy:" in err
        result = json.loads(out)
        # Only the two the rules left undecided went out; the one they decided did not.
        assert result["undecided"] == 2 and asked == 2
        assert result["llm"]["asked"] == 2 and result["llm"]["recorded"] == 1
        frame = Workspace(ws).frame().set_index("task_id")
        assert frame.loc["t-yes", "judge_method"] == "llm"
        assert frame.loc["t-yes", "judge_verdict"] == "correct"
        assert "judge-model" in frame.loc["t-yes", "judge_evidence"]
        assert frame.loc["t-stay", "judge_verdict"] == "undecided"  # still for people
        assert frame.loc["t-count", "judge_method"] != "llm"

        # Re-running the rules keeps the paid-for verdict; asking again uses the cache.
        code, out, err = invoke("verdicts", "judge", "--workspace", str(ws), "--json")
        assert code == 0, err
        assert json.loads(out)["kept"] == 1
        kept = Workspace(ws).verdict_of(str(frame.loc["t-yes", "id"]))
        assert kept is not None and kept["judge_method"] == "llm"
        code, out, err = invoke("verdicts", "judge", "--llm", "openai-compatible",
                                "--workspace", str(ws), "--json")
        assert code == 0, err
        # The one still undecided is asked again, and the LLM's own "undecided" comes from the
        # cache: nothing is sent twice.
        assert json.loads(out)["llm"]["asked"] == 1
        assert len(fake.requests) == asked


def test_the_llm_judge_without_a_server_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _undecided_by_rules(tmp_path)
    monkeypatch.delenv("FAILLAB_OPENAI_BASE_URL", raising=False)
    result = CliRunner().invoke(main, ["verdicts", "judge", "--llm", "openai-compatible",
                                       "--workspace", str(ws)])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "FAILLAB_OPENAI_BASE_URL" in result.output + result.stderr
