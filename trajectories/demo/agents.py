"""Simulated agents that act on demo tasks turn by turn against the real demo database.

An agent profile fixes a model's skill and the mix of its failures (loosely after the failure
profiles reported for EHR-Complex: one model leaning to SQL logic and code look-ups, one to
semantic misunderstanding and loops, a small model, a Python-first coder).  For each
(run, task, rollout) a seeded RNG decides success or one failure category, and a script builder
writes the steps that failure produces.  Every SQL statement is executed for real, so every
observation is a genuine result table or a genuine DuckDB error.  Python steps are not executed,
but they follow the rules of a stateless sandbox: a name defined in an earlier step is gone.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from trajectories.demo.drafting import (
    CODE,
    FORMAT,
    LOGIC,
    LOOP,
    SCOPE,
    SEMANTIC,
    TaskSpec,
    Variant,
)
from trajectories.demo.sqlexec import DemoDatabase, SqlResult
from trajectories.model import Outcome, Run, Step, StepKind, Trajectory

__all__ = ["PROFILES", "TEMPERATURES", "AgentProfile", "Simulator", "simulate_runs"]


@dataclass(frozen=True)
class AgentProfile:
    model: str
    style: str  # "sql": SQL tool calls; "python": code cells that query the database
    skill: float  # chance of solving a clean patient-level task
    weights: tuple[tuple[str, float], ...]  # relative failure-category mix
    explore: float  # appetite for schema browsing and sample rows
    max_turns: int
    records_outcome: bool  # whether the producer stored a success flag (else exact match)
    slip: float  # chance of a transient execution error that the agent then fixes
    chatty: float = 0.35  # chance of commenting on an observation before the next action


PROFILES: tuple[AgentProfile, ...] = (
    AgentProfile("sim-gpt-strong", "sql", 0.74,
                 ((LOGIC, 0.41), (CODE, 0.32), (SEMANTIC, 0.12), (FORMAT, 0.07), (SCOPE, 0.04),
                  (LOOP, 0.04)), 0.5, 20, True, 0.25, 0.55),
    AgentProfile("sim-kimi-like", "sql", 0.7,
                 ((SEMANTIC, 0.38), (CODE, 0.29), (LOGIC, 0.15), (LOOP, 0.1), (FORMAT, 0.05),
                  (SCOPE, 0.03)), 0.8, 20, False, 0.2, 0.7),
    AgentProfile("sim-small", "sql", 0.38,
                 ((LOGIC, 0.25), (LOOP, 0.25), (FORMAT, 0.2), (SEMANTIC, 0.15), (CODE, 0.15)),
                 0.3, 15, True, 0.5, 0.35),
    AgentProfile("sim-python-coder", "python", 0.58,
                 ((SCOPE, 0.45), (LOGIC, 0.2), (FORMAT, 0.15), (CODE, 0.1), (SEMANTIC, 0.1)),
                 0.5, 20, False, 0.3, 0.6),
)
TEMPERATURES: tuple[float, ...] = (0.0, 0.6)

# Misspellings agents really produce (MIMIC-III names, snake-cased columns); each yields a real
# DuckDB catalog/binder error when executed.
_TYPOS = (("labevents", "lab_events"), ("diagnoses_icd", "diagnoses"),
          ("prescriptions", "prescription"), ("icustays", "icu_stays"),
          ("chartevents", "chart_events"), ("drgcodes", "drg_codes"), ("valuenum", "value_num"),
          ("admittime", "admit_time"), ("careunit", "care_unit"), ("icd_code", "icd9_code"),
          ("charttime", "chart_time"), ("insurance", "insurance_type"))
_PY_VARS = ("cohort", "df", "labs", "adm", "result", "dx")


def _break_sql(sql: str, rng: random.Random) -> str:
    options = [(a, b) for a, b in _TYPOS if re.search(rf"\b{a}\b", sql)]
    if not options:
        return sql.replace("SELECT", "SELEC", 1)
    old, new = rng.choice(options)
    return re.sub(rf"\b{old}\b", new, sql, count=1)


def _reshape(answer: Any) -> Any:
    """Right values, wrong shape: what an agent hands back when it ignores the format spec."""
    if answer is None:
        return "NULL"
    if len(answer) == 1 and len(answer[0]) == 1:
        return str(answer[0][0])  # a bare string instead of [[value]]
    if len(answer[0]) > 1:
        return [row[0] for row in answer]  # drops the required count/second field
    return "; ".join(str(row[0]) for row in answer)


class _Script:
    """Accumulates the steps of one trajectory."""

    def __init__(self, db: DemoDatabase, rng: random.Random, style: str,
                 chatty: float = 0.0) -> None:
        self.db = db
        self.rng = rng
        self.style = style
        self.chatty = chatty
        self.steps: list[Step] = []
        self.turns = 0

    def _ms(self, base: float, rows: int = 0) -> float:
        # durations are part of the content hash, so they come from the seeded RNG
        return round(base * (0.5 + self.rng.random()) + rows * 0.05, 1)

    def user(self, text: str) -> None:
        self.steps.append(Step(kind=StepKind.MESSAGE, role="user", content=text))

    def say(self, text: str) -> None:
        self.steps.append(Step(kind=StepKind.MESSAGE, role="assistant", content=text))

    def think(self, table: str) -> None:
        self.say(self.rng.choice((
            f"Let me see what {table} looks like for this question.",
            f"{table} should link to admissions through hadm_id; checking its rows.",
            f"Before aggregating, a quick look at {table}.",
        )))

    def tool(self, name: str, args: dict[str, Any], observation: str) -> None:
        self.turns += 1
        self.steps.append(Step(kind=StepKind.TOOL_CALL, name=name,
                               arguments=json.dumps(args, sort_keys=True),
                               observation=observation, duration_ms=self._ms(4.0)))

    def query(self, sql: str, var: str = "df") -> SqlResult:
        """Run SQL in the agent's style: a SQL tool call or a self-contained Python cell."""
        res = self.db.run(sql)
        self.turns += 1
        if self.style == "sql":
            self.steps.append(Step(kind=StepKind.SQL, name="execute_sql", code=sql,
                                   observation=res.observation, error=res.error is not None,
                                   duration_ms=self._ms(25.0, len(res.rows))))
        else:
            code = ('import duckdb\ncon = duckdb.connect("ehr.duckdb", read_only=True)\n'
                    f'{var} = con.sql("""\n{sql}\n""").df()\nprint({var}.to_string(max_rows=15))')
            if res.error is None:
                obs = res.observation
            else:
                obs = ('Traceback (most recent call last):\n  File "<cell>", line 3, in '
                       f"<module>\nduckdb.{res.error_type}: {res.error}")
            self.steps.append(Step(kind=StepKind.PYTHON, name="execute_python", code=code,
                                   observation=obs, error=res.error is not None,
                                   duration_ms=self._ms(180.0, len(res.rows))))
        if self.rng.random() < self.chatty:
            self._comment(res)
        return res

    def _comment(self, res: SqlResult) -> None:
        if res.error is not None:
            self.say(f"That failed ({res.error.splitlines()[0][:80]}).")
        elif not res.rows:
            self.say("No rows came back for that.")
        else:
            n = len(res.rows)
            self.say(f"Got {n} row{'s' if n != 1 else ''}; {', '.join(res.columns[:3])} "
                     "look as expected.")

    def python_use(self, var: str) -> None:
        """A cell that relies on ``var`` from an earlier cell: in a stateless sandbox it fails."""
        self.turns += 1
        first, shown = self.rng.choice((
            (f"summary = {var}.iloc[:, 0].value_counts().head(5)", "summary"),
            (f"top = {var}.head(5).values.tolist()", "top"),
            (f"n = {var}.iloc[:, 0].nunique()", "n"),
        ))
        code = f"{first}\nprint({shown})"
        obs = ('Traceback (most recent call last):\n  File "<cell>", line 1, in <module>\n'
               f"NameError: name '{var}' is not defined")
        self.steps.append(Step(kind=StepKind.PYTHON, name="execute_python", code=code,
                               observation=obs, error=True, duration_ms=self._ms(40.0)))

    def final(self, answer: Any, text: str | None = None) -> Any:
        body = json.dumps(answer, ensure_ascii=False)
        self.say(f"{text}\nFinal answer: {body}" if text else f"Final answer: {body}")
        return answer


class Simulator:
    """Turns (profile, temperature, task, rollout) into a trajectory; deterministic by seed."""

    def __init__(self, db: DemoDatabase, seed: int) -> None:
        self.db = db
        self.seed = seed
        self._usable: dict[str, dict[str, list[Variant]]] = {}
        self._tables = ", ".join(db.table_names())

    # -- which failures can this task show? ----------------------------------------------
    def usable(self, spec: TaskSpec) -> dict[str, list[Variant]]:
        """Variants per category that execute and really change the answer."""
        hit = self._usable.get(spec.task.id)
        if hit is not None:
            return hit
        gt = spec.task.ground_truth
        out: dict[str, list[Variant]] = {}
        for v in spec.variants:
            res = self.db.run(v.sql)
            if res.error is None and res.answer != gt:
                out.setdefault(v.category, []).append(v)
        self._usable[spec.task.id] = out
        return out

    def _available(self, spec: TaskSpec) -> set[str]:
        if spec.task.variant == "noise":
            # a missing-evidence task is failed by answering anyway (or mangling NULL); a loop
            # that gives up would coincide with the NULL answer
            return {SEMANTIC, FORMAT}
        return set(self.usable(spec)) | {SCOPE, FORMAT, LOOP}

    def _draw(self, profile: AgentProfile, spec: TaskSpec, rng: random.Random) -> str | None:
        skill = profile.skill
        if spec.task.scope == "population":
            skill *= 0.65  # cohort questions are markedly harder
        if spec.task.variant == "noise":
            skill *= 0.6
        if rng.random() < skill:
            return None
        avail = self._available(spec)
        cats = [(c, w) for c, w in profile.weights if c in avail and w > 0]
        if not cats:
            return FORMAT
        total = sum(w for _, w in cats)
        x = rng.random() * total
        for c, w in cats:
            x -= w
            if x <= 0:
                return c
        return cats[-1][0]

    def decide(self, profile: AgentProfile, temperature: float, spec: TaskSpec,
               rollout: int) -> str | None:
        key = f"{self.seed}|{profile.model}|{spec.task.id}"
        roll = random.Random(f"{key}|{temperature}|{rollout}|decide")
        if temperature == 0.0:
            # greedy decoding is mostly, not perfectly, repeatable across rollouts
            base = self._draw(profile, spec, random.Random(f"{key}|greedy"))
            return base if roll.random() < 0.85 else self._draw(profile, spec, roll)
        return self._draw(profile, spec, roll)

    # -- the trajectory -------------------------------------------------------------------
    def run(self, profile: AgentProfile, temperature: float, spec: TaskSpec,
            rollout: int) -> Trajectory:
        category = self.decide(profile, temperature, spec, rollout)
        key = f"{self.seed}|{profile.model}|{temperature}|{spec.task.id}|{rollout}"
        script, answer = self._script(profile, spec, category, random.Random(key))
        gt = spec.task.ground_truth
        if category is not None and answer == gt:
            # the chosen mistake happened not to matter here; fall back to one that does
            category = FORMAT
            script, answer = self._script(profile, spec, category, random.Random(key))
        success = answer == gt
        run = Run(name=f"{profile.model}/t{temperature}", model=profile.model,
                  temperature=temperature, rollout=rollout,
                  configuration={"style": profile.style, "max_turns": profile.max_turns,
                                 "temperature": temperature})
        outcome = (Outcome(success=success, reward=1.0 if success else 0.0, source="simulator")
                   if profile.records_outcome else None)
        # the intended failure travels as an extra field: ground truth for the demo only
        traj = Trajectory(task=spec.task, run=run, steps=script.steps, final_answer=answer,
                          outcome=outcome)
        traj.__pydantic_extra__ = {"simulated_failure": category}
        return traj

    def _script(self, profile: AgentProfile, spec: TaskSpec, category: str | None,
                rng: random.Random) -> tuple[_Script, Any]:
        style = "python" if category == SCOPE else profile.style
        s = _Script(self.db, rng, style, profile.chatty)
        task = spec.task
        s.user(f"{task.question}\n\nAnswer format: {task.answer_format}. "
               "Give the final answer as JSON.")
        s.say(rng.choice((
            f"I'll start by looking at the {spec.tables[0]} table and related tables.",
            f"Let me check which tables hold this; {', '.join(spec.tables[:2])} look relevant.",
            "First I'll inspect the schema, then build the query step by step.",
        )))
        if rng.random() < profile.explore:
            s.tool("list_tables", {}, self._tables)
        n_schema = 1 + int(rng.random() * len(spec.tables))
        for table in spec.tables[:n_schema]:
            s.tool("get_schema", {"table": table}, self.db.schema(table))
        if rng.random() < profile.explore:
            s.query(f"SELECT * FROM {spec.tables[0]} LIMIT 5")
        params = (task.model_extra or {}).get("params") or {}
        sid = params.get("subject_id")
        for table in spec.tables[: 1 + int(rng.random() * 2 * profile.explore)]:
            if table.startswith("d_"):
                continue
            if rng.random() < 0.6:
                s.think(table)
            # a first look at the rows involved before writing the real query
            if sid is not None:
                s.query(f"SELECT * FROM {table} WHERE subject_id = {sid} LIMIT 10")
            else:
                s.query(f"SELECT COUNT(*) AS n_rows FROM {table}")
        lookups = spec.lookups if category != LOOP else spec.lookups[:1]
        for sql in lookups:
            if rng.random() < 0.5:
                s.say(rng.choice(("Looking up the identifiers I need.",
                                  "Checking the dictionary values before filtering.",
                                  "Let me confirm how this is recorded.")))
            s.query(sql)
        if task.variant == "noise":
            return s, self._noise(s, spec, category)
        if category is None:
            return s, self._success(s, profile, spec)
        usable = self.usable(spec)
        if category in (SEMANTIC, CODE, LOGIC):
            variant = rng.choice(usable[category])
            if category == LOGIC and rng.random() < profile.slip:
                self._slip(s, variant.sql)
            s.say(variant.note)
            res = s.query(variant.sql)
            if res.answer is None and rng.random() < 0.5:
                s.say("No rows came back; the cohort must simply be empty.")
            return s, s.final(res.answer)
        if category == FORMAT:
            res = s.query(task.reference_sql or "")
            shaped = _reshape(res.answer)
            return s, s.final(shaped, "Here is what I found.")
        if category == SCOPE:
            return s, self._scope(s, spec, usable)
        return s, self._loop(s, profile, spec, usable)

    def _slip(self, s: _Script, sql: str) -> None:
        s.query(_break_sql(sql, s.rng))
        s.say(s.rng.choice(("That name is wrong; fixing the query.",
                            "The error points to a misspelled name; correcting it.")))

    def _success(self, s: _Script, profile: AgentProfile, spec: TaskSpec) -> Any:
        sql = spec.task.reference_sql or ""
        if s.rng.random() < profile.slip:
            self._slip(s, sql)
        res = s.query(sql)
        if s.rng.random() < profile.explore * 0.5:
            s.say("The result looks plausible; running it once more to be sure it is stable.")
            s.query(sql)
        return s.final(res.answer)

    def _noise(self, s: _Script, spec: TaskSpec, category: str | None) -> Any:
        probe = spec.probe or ""
        if category is None:
            s.query(probe)
            return s.final(None, f"NULL. {spec.probe_note}")
        if category == FORMAT:
            s.query(probe)
            return s.final("NULL", spec.probe_note)
        relaxed = spec.relaxed
        assert relaxed is not None
        if s.rng.random() < 0.5:
            s.query(probe)
        s.say(relaxed.note)
        res = s.query(relaxed.sql)
        return s.final(res.answer)

    def _scope(self, s: _Script, spec: TaskSpec, usable: dict[str, list[Variant]]) -> Any:
        sql = spec.task.reference_sql or ""
        s.say("I'll pull the cohort into a DataFrame and finish the aggregation in Python.")
        var = s.rng.choice(_PY_VARS)
        for attempt in range(2 + int(s.rng.random() * 3)):
            s.query(sql, var=var)
            s.python_use(var)
            if attempt == 0:
                s.say(f"NameError: '{var}' is not defined; re-running the cell that loads it.")
            elif s.rng.random() < 0.5:
                s.say(f"Still not defined. Loading {var} again before using it.")
        wrong = [v for cat in (LOGIC, SEMANTIC, CODE) for v in usable.get(cat, [])]
        if wrong and s.rng.random() < 0.6:
            v = s.rng.choice(wrong)
            s.say("Rebuilding a smaller cohort in a single cell instead.")
            res = s.query(v.sql, var=var)
            return s.final(res.answer)
        s.say("I could not complete the computation in this environment.")
        return s.final(None)

    def _loop(self, s: _Script, profile: AgentProfile, spec: TaskSpec,
              usable: dict[str, list[Variant]]) -> Any:
        stuck = [v.sql for v in usable.get(CODE, []) if self.db.run(v.sql).answer is None]
        base = stuck[0] if stuck and s.rng.random() < 0.7 else \
            _break_sql(spec.task.reference_sql or "", s.rng)
        # the "revisions" are cosmetic only: same plan, same failure, turn after turn
        cosmetic = (base, base + ";", base.replace("\n", " "), "  " + base.replace("\n", "\n  "))
        i = 0
        while s.turns < profile.max_turns:
            s.query(cosmetic[i % len(cosmetic)] if i % 3 else base)
            if s.rng.random() < 0.3 and s.turns < profile.max_turns:
                s.say(s.rng.choice(("Let me try that again.",
                                    "Still nothing useful; retrying with the same filter.",
                                    "Maybe it was transient; running it once more.")))
            i += 1
        s.say("I have reached the turn limit without finding the answer.")
        return s.final(None)


def simulate_runs(db: DemoDatabase, specs: list[TaskSpec], *, seed: int, rollouts: int,
                  profiles: tuple[AgentProfile, ...] = PROFILES,
                  temperatures: tuple[float, ...] = TEMPERATURES) -> Iterator[Trajectory]:
    """All runs x tasks x rollouts, ids filled in, in a fixed order."""
    sim = Simulator(db, seed)
    for profile in profiles:
        for temperature in temperatures:
            for spec in specs:
                for rollout in range(rollouts):
                    yield sim.run(profile, temperature, spec, rollout).with_id()

