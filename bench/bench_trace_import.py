"""Benchmark OpenTelemetry trace import against LM Studio import, per trajectory.

The trace is a real one: the small EHRSQL agent of the importer tests
(``tests/trajectories/sdk_traces.py``, kind ``otel-span-otlp``) traced by
opentelemetry-instrumentation-openai-v2 and written as OTLP JSON lines. It is replicated N
times with new trace and span ids and a numbered question (each copy a new trajectory), in two
layouts: one file holding every trace (a collector's file exporter appends so) and one file per
trace. The LM Studio side replicates the ten real exports of ``../shared/data`` as
``bench_judge.py`` does. Each layout is imported by ``faillab import`` in a fresh workspace;
wall time and the CPU time of the import's processes are reported per trajectory.

    .venv/bin/python bench/bench_trace_import.py --n 2000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fake_agent_llm import FakeAgentLLM  # noqa: E402
from tests.support import EHRSQL_SQLITE, LMSTUDIO_SAMPLE  # noqa: E402
from tests.trajectories.sdk_traces import ANSWER, QUERIES, QUESTION  # noqa: E402


def real_trace(tmp: Path) -> list[dict[str, Any]]:
    """The OTLP requests (one per line) of one real traced run."""
    out = tmp / "made"
    with FakeAgentLLM(QUERIES, ANSWER) as llm:
        subprocess.run([sys.executable, str(REPO / "tests" / "trajectories" / "sdk_traces.py"),
                        "otel-span-otlp", str(out), llm.session_url("bench"),
                        str(EHRSQL_SQLITE)], check=True, cwd=REPO, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    return [json.loads(line) for line in (out / "spans.jsonl").read_text().splitlines()]


def copy_of(requests: list[dict[str, Any]], index: int) -> list[str]:
    """The trace with new ids and its question numbered (a distinct trajectory)."""
    trace_id = secrets.token_hex(16)
    span_ids: dict[str, str] = {}

    def new_id(old: str) -> str:
        return span_ids.setdefault(old, secrets.token_hex(8))

    lines = []
    for request in requests:
        text = json.dumps(request).replace(QUESTION, f"{QUESTION} (#{index})")
        copy = json.loads(text)
        for resource_spans in copy["resourceSpans"]:
            for scope in resource_spans["scopeSpans"]:
                for span in scope["spans"]:
                    span["traceId"] = trace_id
                    span["spanId"] = new_id(span["spanId"])
                    if span.get("parentSpanId"):
                        span["parentSpanId"] = new_id(span["parentSpanId"])
        lines.append(json.dumps(copy))
    return lines


def lmstudio_folder(folder: Path, n: int) -> None:
    sources = sorted(LMSTUDIO_SAMPLE.glob("*.conversation.json"))
    for i in range(n):
        doc = json.loads(sources[i % len(sources)].read_text("utf-8"))
        doc["name"] = f"{doc.get('name')} #{i}"  # a distinct conversation, a new record
        (folder / f"{i}.conversation.json").write_text(json.dumps(doc), "utf-8")


def import_time(source: Path, workspace: Path) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "faillab.cli", "import", str(source),
                           "--workspace", str(workspace), "--json"],
                          cwd=REPO, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(proc.stdout)
    imported = report["imported"]
    return {"imported": imported, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "wall_ms_per_trajectory": round(1000 * wall / max(imported, 1), 2),
            "cpu_ms_per_trajectory": round(1000 * cpu / max(imported, 1), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        requests = real_trace(tmp)
        copies = [copy_of(requests, i) for i in range(opts.n)]
        one = tmp / "otlp-one-file"
        one.mkdir()
        (one / "spans.jsonl").write_text("".join(line + "\n" for c in copies for line in c))
        many = tmp / "otlp-file-per-trace"
        many.mkdir()
        for i, lines in enumerate(copies):
            (many / f"trace-{i}.jsonl").write_text("".join(line + "\n" for line in lines))
        lms = tmp / "lmstudio"
        lms.mkdir()
        lmstudio_folder(lms, opts.n)
        result = {"n": opts.n,
                  "otlp_one_file": import_time(one / "spans.jsonl", tmp / "ws1"),
                  "otlp_file_per_trace": import_time(many, tmp / "ws2"),
                  "lmstudio": import_time(lms, tmp / "ws3")}
        lm = result["lmstudio"]
        for key in ("otlp_one_file", "otlp_file_per_trace"):
            part = result[key]
            part["wall_ratio_to_lmstudio"] = round(
                part["wall_ms_per_trajectory"] / lm["wall_ms_per_trajectory"], 2)
            part["cpu_ratio_to_lmstudio"] = round(
                part["cpu_ms_per_trajectory"] / lm["cpu_ms_per_trajectory"], 2)
        shutil.rmtree(tmp / "ws1", ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
