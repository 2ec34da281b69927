"""Signals read off a trajectory, for the heuristic pre-labeller.

Everything here is pure and tolerant: steps may lack code, carry non-JSON arguments, huge
observations or answers of any type, and no detector may raise on them. Each detector returns
zero or more ``Signal`` objects naming an internal category key (the EHR-Complex keys, plus the
Clean/Noise keys used by the RobustGym taxonomy), a confidence, the step where the evidence first
appears and a one-sentence rationale. Choosing among signals is the labeller's job.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trajectories.model import Step, StepKind, Trajectory

# Internal category keys (the EHR-Complex taxonomy keys).
SEMANTIC = "semantic_misunderstanding"
CODE_LOOKUP = "medical_code_lookup_error"
SQL_LOGIC = "sql_logic_error"
VARIABLE_SCOPE = "variable_scope_error"
ANSWER_FORMAT = "answer_format_error"
STUCK_IN_LOOP = "stuck_in_loop"
# Clean/Noise keys, only emitted when the target taxonomy has them.
FALSE_NULL = "false_null"
NULL_NOT_RETURNED = "null_not_returned"
NOISE_NOT_DETECTED = "noise_not_detected"

# Long observations are cut before any regex runs: errors and empty results show at the start,
# and a few kilobytes are plenty to find identifiers, while keeping the labeller fast.
_OBS_HEAD = 4000
_OBS_TAIL = 1000
_CODE_MAX = 20000
_MAX_ROWS = 2000
_MAX_CLUSTERS = 40
_MAX_LOOKUPS = 20

DICTIONARY_TABLES: dict[str, tuple[str, ...]] = {
    "d_icd_diagnoses": ("diagnoses_icd",),
    "d_icd_procedures": ("procedures_icd",),
    "d_labitems": ("labevents",),
    "d_items": (
        "chartevents",
        "inputevents",
        "outputevents",
        "procedureevents",
        "datetimeevents",
        "ingredientevents",
    ),
}
_ICD_DICTS = frozenset({"d_icd_diagnoses", "d_icd_procedures"})

SQL_ARG_KEYS = ("query", "sql", "sql_query", "statement")
PYTHON_ARG_KEYS = ("code", "script", "python", "source")

_RE_TABLE_REF = re.compile(r"\b(?:from|join)\s+([`\"\[]?[\w.]+)", re.I)
_RE_SQLISH = re.compile(r"^\s*(?:select|with|create|insert|pragma|explain)\b", re.I)
_RE_ERROR = re.compile(
    r"^\s*(?:error|traceback|exception)\b|(?:Error|Exception)\s*[:(]"
    r"|no such (?:table|column)|syntax error|does not exist|is not defined|doesn't exist",
    re.I,
)
_ERROR_WORDS = ("error", "exception", "traceback", "no such", "exist", "not defined")
_RE_EMPTY = re.compile(
    r"^\s*(?:\[\s*\]|\(\s*\)|\{\s*\}|none|null|nan|empty(?: dataframe| result| set)?\b.*"
    r"|0 rows?\b.*|no (?:rows|results?|records?)\b.*|)\s*$",
    re.I | re.S,
)
_RE_NAME_ERROR = re.compile(r"name '([A-Za-z_]\w*)' is not defined|\b([A-Za-z_]\w*) is not defined")
_RE_MISSING_TABLE = re.compile(
    r"no such table:\s*([\w.]+)|Table with name ([\w.]+) does not exist"
    r"|relation \"([\w.]+)\" does not exist|Table '([\w.]+)' doesn't exist",
    re.I,
)
_RE_PY_DEFINED = re.compile(
    r"^[ \t]*([A-Za-z_]\w*)(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*[ \t]*(?::[^=\n]+)?=(?!=)"
    r"|^[ \t]*(?:def|class)[ \t]+([A-Za-z_]\w*)"
    r"|\bimport[ \t]+[\w.]+[ \t]+as[ \t]+([A-Za-z_]\w*)"
    r"|^[ \t]*import[ \t]+([A-Za-z_]\w*)"
    r"|\bfor[ \t]+([A-Za-z_]\w*)[ \t]+in\b",
    re.M,
)
_RE_SQL_DEFINED = re.compile(
    r"\bcreate\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(?:table|view)\s+"
    r"(?:if\s+not\s+exists\s+)?[`\"]?([\w.]+)"
    r"|(?:\bwith(?:\s+recursive)?|,)\s*([A-Za-z_]\w*)\s+as\s*\(",
    re.I,
)
# Names that are state by nature (connections, frames); a NameError on them means the agent
# expected an earlier execution's environment to survive.
_STATEFUL_NAMES = frozenset(
    {"conn", "con", "cur", "cursor", "engine", "db", "df", "result", "results", "data", "cohort"}
)
_MODULE_ALIASES = frozenset({"pd", "np", "plt", "json", "re", "os", "sqlite3", "duckdb", "math"})

_RE_LITERAL = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|\b\d+(?:\.\d+)?\b")
_RE_STRING_LIT = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"")
_RE_NUMBER_LIT = re.compile(r"\b\d+(?:\.\d+)?\b")
_RE_QUOTED = re.compile(r"'([^'\n]{1,40})'")
_RE_ICD_TOKEN = re.compile(r"\b([A-Z]\d{2}[A-Z0-9]{0,5}|\d{3,5}|[VE]\d{2,4})\b")
_RE_ITEMID_TOKEN = re.compile(r"\b(\d{5,6})\b")
_RE_DOTTED_ICD = re.compile(
    r"'\s*(\d{3}\.\d{1,2}|[VE]\d{2,3}\.\d{1,2}|[A-Z]\d{2}\.[A-Z0-9]{1,4})\s*'"
)
_RE_ICD_VERSION = re.compile(r"\bicd_version\s*(?:=|==)\s*'?(9|10)\b", re.I)
_RE_QUESTION_VERSION = re.compile(r"icd[\s\-_]?(?:9|10)\b|\bicd(?:9|10)", re.I)
_RE_COUNT_NONDISTINCT = re.compile(r"\bcount\s*\(\s*(?!distinct\b)", re.I)
_RE_JOIN = re.compile(r"\bjoin\b", re.I)
_RE_UNIT_WORDS = re.compile(
    r"\b(?:patients?|admissions?|distinct|unique|stays?|individuals?|people)\b", re.I
)
_RE_TEMPORAL_WORDS = re.compile(
    r"\b(?:first|last|initial|second|third|previous|next|subsequent|following|prior|before|"
    r"after|earliest|latest|most recent|within|since)\b",
    re.I,
)
_RE_TEMPORAL_SQL = re.compile(
    r"\border\s+by\b|\bmin\s*\(|\bmax\s*\(|\brow_number\b|\b(?:dense_)?rank\s*\(|\blag\s*\("
    r"|\blead\s*\(|\bbetween\b|\binterval\b|\bjulianday\b|\bstrftime\b|\bdatetime\s*\("
    r"|\bdate\s*\(|(?:time|date)\w*\s*[<>]|[<>]=?\s*[\w.]*(?:time|date)",
    re.I,
)
_RE_DISTINCT = re.compile(r"\bdistinct\b", re.I)
_RE_BUDGET = re.compile(
    r"max(?:imum)?[\s_-]*(?:number of\s+)?(?:turns|steps|iterations)|turn (?:limit|budget)"
    r"|budget (?:exhausted|exceeded)|too many (?:turns|steps)",
    re.I,
)
_NULL_TEXTS = frozenset(
    {"", "null", "none", "nan", "n/a", "na", "no data", "no answer", "unknown", "[]", "{}"}
)


@dataclass(frozen=True)
class Signal:
    category: str
    confidence: float
    step: int | None
    rationale: str


@dataclass(slots=True)  # not frozen: frozen __init__ is measurably slower on hot paths
class ActionView:
    """One action step, reduced to what the detectors need (treat as read-only)."""

    index: int  # into Trajectory.steps
    label: str  # "sql", "python" or the tool name, for rationales
    sql: str | None
    python: str | None
    payload: str  # normalised action text, for repetition checks
    observation: str  # cut to head + tail
    error: bool
    empty: bool
    tool_table: str | None  # table argument of a lookup tool (e.g. substring search)
    tool_column: str | None
    tables: frozenset[str]  # tables the SQL reads, schema prefixes dropped


def clip(text: str | None, limit: int = _OBS_HEAD) -> str:
    if not text:
        return ""
    if len(text) <= limit + _OBS_TAIL:
        return text
    return text[:limit] + "\n...\n" + text[-_OBS_TAIL:]


def snippet(text: str | None, limit: int = 80) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _parse_arguments(raw: Any) -> Any:
    if raw is None:
        return None
    if isinstance(raw, dict | list):
        return raw
    if not isinstance(raw, str):
        return str(raw)
    text = raw.strip()
    if text[:1] in "{[":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return text
    return text


def _first_str(args: dict[str, Any], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def view_step(index: int, step: Step) -> ActionView:
    kind = step.kind
    code = step.code if isinstance(step.code, str) else None
    sql: str | None = None
    python: str | None = None
    tool_table: str | None = None
    tool_column: str | None = None
    name = step.name if isinstance(step.name, str) else None
    label = str(kind.value if isinstance(kind, StepKind) else kind)
    args = _parse_arguments(step.arguments)
    if kind == StepKind.SQL:
        sql = code or (_first_str(args, SQL_ARG_KEYS) if isinstance(args, dict) else None)
        if sql is None and isinstance(args, str):
            sql = args
    elif kind == StepKind.PYTHON:
        python = code or (_first_str(args, PYTHON_ARG_KEYS) if isinstance(args, dict) else None)
        if python is None and isinstance(args, str):
            python = args
    else:
        label = name or "tool_call"
        lowered = (name or "").lower()
        if isinstance(args, dict):
            # tau-bench style: sql_db_query(query="SELECT ...") is SQL in all but name.
            sql = _first_str(args, SQL_ARG_KEYS)
            if sql is None:
                python = _first_str(args, PYTHON_ARG_KEYS)
            table = args.get("table")
            column = args.get("column")
            tool_table = table.lower() if isinstance(table, str) else None
            tool_column = column.lower() if isinstance(column, str) else None
        elif isinstance(args, str) and args:
            if "sql" in lowered or _RE_SQLISH.match(args):
                sql = args
            elif "python" in lowered or "code" in lowered:
                python = args
        if code and sql is None and python is None:
            if _RE_SQLISH.match(code) or "sql" in lowered:
                sql = code
            else:
                python = code
    body = sql if sql is not None else python
    if body is None and isinstance(args, dict):
        # Lookup tools: keep the argument values as words so that searches for different
        # terms do not look like repetitions of one another.
        body = " ".join(f"{k}={args[k]}" for k in sorted(args, key=str))
    if body is None:
        body = step.arguments if isinstance(step.arguments, str) else (code or "")
    payload = f"{name or label} {' '.join(body[:_CODE_MAX].lower().split())}"
    observation = clip(step.observation if isinstance(step.observation, str) else None)
    head = observation[:600]
    error = bool(step.error) or _looks_like_error(head)
    # Empty results are short; skipping the regex on long outputs keeps labelling fast.
    empty = not error and len(observation) < 200 and bool(_RE_EMPTY.match(observation))
    return ActionView(
        index=index,
        label=label,
        sql=sql[:_CODE_MAX] if sql else None,
        python=python[:_CODE_MAX] if python else None,
        payload=payload,
        observation=observation,
        error=error,
        empty=empty,
        tool_table=tool_table,
        tool_column=tool_column,
        tables=frozenset(sql_tables(sql[:_CODE_MAX])) if sql else frozenset(),
    )


def _looks_like_error(head: str) -> bool:
    low = head.lower()
    # Plain substring tests first: most observations are result rows with none of these words.
    if not any(k in low for k in _ERROR_WORDS):
        return False
    return bool(_RE_ERROR.search(head))


def _mentions_budget(text: Any) -> bool:
    if not isinstance(text, str) or not text:
        return False
    low = clip(text, 400).lower()
    if not any(k in low for k in ("turn", "step", "budget", "iteration")):
        return False
    return bool(_RE_BUDGET.search(low))


def action_views(trajectory: Trajectory) -> list[ActionView]:
    views: list[ActionView] = []
    for i, step in enumerate(trajectory.steps):
        if step.kind == StepKind.MESSAGE:
            continue
        views.append(view_step(i, step))
    return views


def sql_tables(sql: str | None) -> set[str]:
    if not sql:
        return set()
    out = set()
    for raw in _RE_TABLE_REF.findall(sql):
        name = raw.strip('`"[').split(".")[-1].lower()
        if name and name not in {"select", "lateral", "unnest"}:
            out.add(name)
    return out


def _cite(view: ActionView, detail: str) -> str:
    return f"step {view.index} ({view.label}): {detail}"


# ---------------------------------------------------------------- variable scope


def _defined_names(view: ActionView) -> set[str]:
    names: set[str] = set()
    if view.python:
        for groups in _RE_PY_DEFINED.findall(view.python):
            names.update(g for g in groups if g)
    if view.sql:
        for groups in _RE_SQL_DEFINED.findall(view.sql):
            names.update(g.split(".")[-1].lower() for g in groups if g)
    return names


def detect_variable_scope(views: list[ActionView]) -> list[Signal]:
    # Collecting defined names is the costly part; skip it when nothing is undefined.
    if not any(
        v.error
        and (
            "not defined" in v.observation
            or "exist" in v.observation.lower()
            or "no such table" in v.observation.lower()
        )
        for v in views
    ):
        return []
    defined: set[str] = set()
    defined_lower: set[str] = set()
    hits: list[tuple[ActionView, str, float, str]] = []
    for view in views:
        obs = view.observation
        if view.error and obs:
            name_match = _RE_NAME_ERROR.search(obs)
            table_match = _RE_MISSING_TABLE.search(obs)
            if name_match:
                name = name_match.group(1) or name_match.group(2)
                if name in defined:
                    hits.append((view, name, 0.92, "defined by an earlier execution"))
                elif name in _STATEFUL_NAMES:
                    hits.append((view, name, 0.75, "state expected from an earlier call"))
                elif name in _MODULE_ALIASES:
                    hits.append((view, name, 0.6, "an import expected to persist"))
                else:
                    hits.append((view, name, 0.45, "never defined in this trajectory"))
            elif table_match:
                table = next(g for g in table_match.groups() if g).split(".")[-1].lower()
                if table in defined_lower:
                    hits.append((view, table, 0.9, "created by an earlier execution"))
        names = _defined_names(view)
        defined.update(names)
        defined_lower.update(n.lower() for n in names)
    if not hits:
        return []
    strongest = max(h[2] for h in hits)
    first = next(h for h in hits if h[2] >= strongest - 0.2)
    view, name, conf, why = first
    if len(hits) >= 2:
        conf = min(0.95, conf + 0.03)  # repeated misses of the same kind: an entrenched assumption
    times = f" ({len(hits)} such errors)" if len(hits) > 1 else ""
    return [
        Signal(
            VARIABLE_SCOPE,
            conf,
            view.index,
            _cite(view, f"'{name}' is undefined although it was {why}{times}.")
            if conf >= 0.6
            else _cite(view, f"NameError on '{name}', {why}{times}."),
        )
    ]


# ---------------------------------------------------------------- stuck in loop


_RE_WORD = re.compile(r"\w+")


def _tokens(payload: str) -> frozenset[str]:
    # Words only: punctuation adds little to plan similarity and a simple pattern is fast.
    return frozenset(_RE_WORD.findall(payload))


def _template(payload: str) -> str:
    return _RE_LITERAL.sub("?", payload)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    la, lb = len(a), len(b)
    small, large = (la, lb) if la <= lb else (lb, la)
    if small < 0.9 * large:  # the bound |a&b|/|a|b| <= small/large already fails
        return small / large
    return len(a & b) / len(a | b)


def has_final_answer(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip().casefold() not in _NULL_TEXTS
    if isinstance(value, list | tuple | dict | set):
        return len(value) > 0
    return True


def detect_loop(views: list[ActionView], trajectory: Trajectory) -> list[Signal]:
    # Cluster actions by plan, against each cluster's first member: the same normalised text
    # (exact), token-set Jaccard >= 0.9 (near), or the same SQL/code once literals are masked
    # (template: guessing ids one after another). Template matches alone are weaker evidence,
    # since exploring a dictionary with different search terms looks the same.
    clusters: list[dict[str, Any]] = []
    for view in views:
        if len(view.payload) < 12:  # argument-less schema calls are not a plan
            continue
        toks = _tokens(view.payload)
        # Masking literals only makes sense for code; lookups are compared by their words.
        tmpl = _template(view.payload) if (view.sql or view.python) else view.payload
        # Compare with the most recent plans only: loops are local, and this bounds the cost
        # on very long trajectories.
        for cl in reversed(clusters[-_MAX_CLUSTERS:]):
            if cl["payload"] == view.payload:
                how = "exact"
            elif _jaccard(cl["tokens"], toks) >= 0.9:
                how = "near"
            elif cl["template"] == tmpl and (view.sql or view.python):
                how = "template"
            else:
                continue
            cl["members"].append((view, how))
            break
        else:
            clusters.append(
                {
                    "payload": view.payload,
                    "tokens": toks,
                    "template": tmpl,
                    "members": [(view, "exact")],
                }
            )
    answered = has_final_answer(trajectory.final_answer)
    last_index = views[-1].index if views else -1
    budget = any(
        _mentions_budget(s.content) or _mentions_budget(s.observation)
        for s in trajectory.steps[-3:]
    )
    best: Signal | None = None
    for cl in clusters:
        members: list[tuple[ActionView, str]] = cl["members"]
        if len(members) < 3:
            continue
        exact = sum(1 for _, how in members if how == "exact")
        close = sum(1 for _, how in members if how in ("exact", "near"))
        unproductive = sum(1 for m, _ in members if m.error or m.empty)
        mostly_unproductive = unproductive * 3 >= len(members) * 2
        stalled = not answered or budget
        if exact >= 3 and (mostly_unproductive or stalled):
            conf, desc = 0.85, f"the same action repeated {exact} times"
            if mostly_unproductive:
                desc += f", {unproductive} of {len(members)} with empty or error results"
        elif exact >= 3:
            # Re-running a query that worked (e.g. when a user asks again) is not unproductive.
            conf, desc = 0.5, f"the same action repeated {exact} times, with results"
        elif close >= 3 and mostly_unproductive:
            conf, desc = 0.75, f"{close} near-identical actions, {unproductive} of "
            desc += f"{len(members)} with empty or error results"
        elif len(members) >= 4 and mostly_unproductive:
            conf, desc = 0.6, f"{len(members)} variants of one query differing only in literals, "
            desc += f"{unproductive} with empty or error results"
        elif close >= 3:
            conf, desc = 0.45, f"{close} near-identical actions"
        else:
            continue
        ends_in_loop = members[-1][0].index == last_index
        if stalled:
            conf += 0.07
            desc += ", ending without an answer" if not answered else ", hitting the turn budget"
        elif not ends_in_loop:
            conf -= 0.1  # the agent broke out and answered: repetition may not be what failed
        if len(members) >= 6:
            conf += 0.03
        conf = round(min(conf, 0.95), 2)
        first = members[0][0]
        sig = Signal(STUCK_IN_LOOP, conf, first.index, _cite(first, desc + "."))
        if best is None or sig.confidence > best.confidence:
            best = sig
    return [best] if best else []


# ---------------------------------------------------------------- answers as tables


def _norm_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            return str(number)
        if number.is_integer() and abs(number) < 1e15:
            return str(int(number))
        return f"{round(number, 2):g}" if abs(number) < 1e6 else str(round(number, 2))
    text = " ".join(str(value).split()).casefold()
    try:
        return _norm_scalar(float(text.replace(",", ""))) if text else text
    except ValueError:
        return text


def _row(value: Any) -> tuple[str, ...]:
    if isinstance(value, dict):
        return tuple(_norm_scalar(v) for v in list(value.values())[:50])
    if isinstance(value, list | tuple):
        out: list[str] = []
        for v in value[:50]:
            if isinstance(v, list | tuple | dict):
                out.extend(_row(v))
            else:
                out.append(_norm_scalar(v))
        return tuple(out)
    return (_norm_scalar(value),)


def as_table(value: Any, _depth: int = 0) -> list[tuple[str, ...]] | None:
    """Normalise an answer into rows of normalised scalars; None when there is no answer."""
    if value is None or _depth > 3:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{":
            try:
                return as_table(json.loads(text), _depth + 1)
            except (ValueError, RecursionError):
                pass
        if not text:
            return None
        parts = [p for p in re.split(r"\s*(?:;|\n)\s*", text[:20000]) if p]
        return [(_norm_scalar(p),) for p in parts[:_MAX_ROWS]]
    if isinstance(value, dict):
        columns = list(value.values())
        if columns and all(isinstance(c, list) for c in columns):
            length = len(columns[0])
            if all(len(c) == length for c in columns):  # column-oriented frame
                return [tuple(_norm_scalar(c[i]) for c in columns) for i in range(length)][
                    :_MAX_ROWS
                ]
        return [_row(value)]
    if isinstance(value, list | tuple):
        return [_row(v) for v in value[:_MAX_ROWS]]
    return [(_norm_scalar(value),)]


@dataclass(frozen=True)
class Answers:
    """Expected and given answers as normalised tables, computed once per trajectory."""

    gold: list[tuple[str, ...]] | None
    pred: list[tuple[str, ...]] | None


def answers(trajectory: Trajectory) -> Answers:
    return Answers(as_table(trajectory.task.ground_truth), as_table(trajectory.final_answer))


def _is_null_table(table: list[tuple[str, ...]] | None) -> bool:
    if table is None or not table:
        return True
    return all(all(v in _NULL_TEXTS for v in row) for row in table)


def _answer_step(trajectory: Trajectory) -> int | None:
    for i in range(len(trajectory.steps) - 1, -1, -1):
        step = trajectory.steps[i]
        if step.kind == StepKind.MESSAGE and step.role == "assistant":
            return i
    return len(trajectory.steps) - 1 if trajectory.steps else None


def _cite_step(trajectory: Trajectory, index: int | None, detail: str) -> str:
    if index is None:
        return f"final answer: {detail}"
    step = trajectory.steps[index]
    label = step.name if step.kind == StepKind.TOOL_CALL and step.name else step.kind.value
    return f"step {index} ({label}): {detail}"


def _match_rows(
    pred: list[tuple[str, ...]], gold: list[tuple[str, ...]], mode: str
) -> tuple[int, int]:
    """Greedy one-to-one matching of rows; returns (matched rows, rows with strict differences).
    mode 'sub': pred row values within a gold row; 'sup': pred row contains a gold row."""
    used = [False] * len(gold)
    gold_sets = [set(g) for g in gold]
    matched = strict = 0
    for p in pred:
        pset = set(p)
        for j, gset in enumerate(gold_sets):
            if used[j]:
                continue
            ok = pset <= gset if mode == "sub" else pset >= gset
            if ok:
                used[j] = True
                matched += 1
                strict += pset != gset
                break
    return matched, strict


def detect_answer_format(trajectory: Trajectory, ans: Answers | None = None) -> list[Signal]:
    answer = trajectory.final_answer
    ans = ans or answers(trajectory)
    gold, pred = ans.gold, ans.pred
    if _is_null_table(gold) or _is_null_table(pred):
        return []
    assert gold is not None and pred is not None
    if pred == gold:
        return []
    step = _answer_step(trajectory)
    flat_gold = Counter(v for row in gold for v in row)
    flat_pred = Counter(v for row in pred for v in row)
    if flat_gold == flat_pred:
        return [
            Signal(
                ANSWER_FORMAT,
                0.85,
                step,
                _cite_step(
                    trajectory,
                    step,
                    "the answer has the right values in a different structure than required.",
                ),
            )
        ]
    if len(pred) == len(gold) and len(gold) <= 500:
        for mode, conf_all, what, short in (
            ("sub", 0.8, "required fields are missing", "missing fields"),
            ("sup", 0.7, "extra fields were added", "extra fields"),
        ):
            matched, strict = _match_rows(pred, gold, mode)
            if strict == 0:
                continue
            if matched == len(gold):
                return [
                    Signal(
                        ANSWER_FORMAT,
                        conf_all,
                        step,
                        _cite_step(trajectory, step, f"every row matches but {what}."),
                    )
                ]
            if len(gold) >= 3 and matched * 5 >= len(gold) * 3:
                return [
                    Signal(
                        ANSWER_FORMAT,
                        0.4,  # values partly wrong: weaker than a signal explaining them
                        step,
                        _cite_step(
                            trajectory,
                            step,
                            f"{matched}/{len(gold)} rows match apart from {short}; the "
                            "other values differ.",
                        ),
                    )
                ]
    if isinstance(answer, str) and answer.strip()[:1] not in "[{":
        values = [v for v in flat_gold if v not in _NULL_TEXTS]
        text = " ".join(answer.casefold().split())
        if 0 < len(values) <= 50 and all(
            re.search(r"(?<![\w.])" + re.escape(v) + r"(?![\w])", text) for v in values
        ):
            conf = 0.5 if len(values) == 1 and len(values[0]) <= 3 else 0.65
            return [
                Signal(
                    ANSWER_FORMAT,
                    conf,
                    step,
                    _cite_step(
                        trajectory,
                        step,
                        "every expected value appears in the answer "
                        "text, but not in the required form.",
                    ),
                )
            ]
    return []


# ---------------------------------------------------------------- medical codes


def _lookup_dict(view: ActionView) -> str | None:
    if view.tool_table in DICTIONARY_TABLES:
        return view.tool_table
    for table in view.tables:
        if table in DICTIONARY_TABLES:
            return table
    return None


def _looked_up_codes(view: ActionView, dict_table: str) -> set[str]:
    """Identifiers visible in a lookup's output, when the lookup returned identifiers at all."""
    if view.error or view.empty:
        return set()
    if view.sql:
        select = view.sql.lower().split("from", 1)[0]
        returns_ids = "icd_code" in select or "itemid" in select or "*" in select
    else:
        returns_ids = view.tool_column in {"icd_code", "itemid"}
    if not returns_ids:
        return set()
    obs = view.observation
    if dict_table in _ICD_DICTS:
        return set(_RE_ICD_TOKEN.findall(obs))
    return set(_RE_ITEMID_TOKEN.findall(obs))


def _literals(sql: str) -> set[str]:
    out = {m.strip().upper() for m in _RE_QUOTED.findall(sql)}
    out.update(_RE_NUMBER_LIT.findall(sql))
    return out


def _icd_family(code: str) -> str | None:
    if code[:1].isdigit():
        return "ICD-9"
    if code[:1] in "VE":  # both versions have V and E chapters: undecidable
        return None
    if code[:1].isalpha() and code[1:2].isdigit():
        return "ICD-10"
    return None


def detect_code_lookup(views: list[ActionView], question: str) -> list[Signal]:
    signals: list[Signal] = []
    sql_views = [v for v in views if v.sql]

    for v in sql_views:
        sql = v.sql or ""
        if "icd" not in sql.lower() or "replace(" in sql.lower():
            continue
        dotted = _RE_DOTTED_ICD.search(sql)
        if dotted:
            conf = 0.85 if v.empty else 0.8
            signals.append(
                Signal(
                    CODE_LOOKUP,
                    conf,
                    v.index,
                    _cite(
                        v,
                        f"dotted ICD code '{dotted.group(1)}' in SQL; MIMIC-IV stores "
                        "codes without the dot.",
                    ),
                )
            )
            break

    if not _RE_QUESTION_VERSION.search(question or ""):
        for v in sql_views:
            version = _RE_ICD_VERSION.search(v.sql or "")
            if version and not v.error:
                signals.append(
                    Signal(
                        CODE_LOOKUP,
                        0.55,
                        v.index,
                        _cite(
                            v,
                            f"restricts to ICD-{version.group(1)} although the question "
                            "names no ICD version.",
                        ),
                    )
                )
                break

    lookups_seen = 0
    for pos, v in enumerate(views):
        dict_table = _lookup_dict(v)
        if dict_table is None or v.error:
            continue
        lookups_seen += 1
        if lookups_seen > _MAX_LOOKUPS:  # bounds the cost; the first lookups matter most
            break
        event_tables = DICTIONARY_TABLES[dict_table]
        later = [
            w for w in views[pos + 1 :] if w.sql and not w.error and w.tables & set(event_tables)
        ]
        if not later:
            continue
        codes = _looked_up_codes(v, dict_table)
        code_col = "icd_code" if dict_table in _ICD_DICTS else "itemid"

        def uses(
            w: ActionView, codes: set[str] = codes, table: str = dict_table, col: str = code_col
        ) -> bool:
            sql = w.sql or ""
            if table in w.tables:
                return True  # resolves codes through the dictionary itself
            if codes:
                return bool(_literals(sql) & {c.upper() for c in codes})
            return col in sql.lower()

        # Only the trailing run matters: the queries that produced the answer.
        trailing: list[ActionView] = []
        for w in reversed(later):
            if uses(w):
                break
            trailing.append(w)
        if trailing:
            first = trailing[-1]
            if codes:
                detail = (
                    f"identifiers found by the lookup at step {v.index} are not used in the query."
                )
                conf = 0.7
            else:
                detail = (
                    f"the lookup at step {v.index} ({dict_table}) is not used: the query "
                    f"has no {code_col} filter."
                )
                conf = 0.5
            signals.append(Signal(CODE_LOOKUP, conf, first.index, _cite(first, detail)))
            break
        if dict_table in _ICD_DICTS and codes:
            families = {f for c in codes if (f := _icd_family(c))}
            final_sql = later[-1].sql or ""
            used = _literals(final_sql) & {c.upper() for c in codes}
            used_families = {f for c in used if (f := _icd_family(c))}
            if (
                len(families) == 2
                and len(used_families) == 1
                and dict_table not in later[-1].tables
            ):
                only = next(iter(used_families))
                signals.append(
                    Signal(
                        CODE_LOOKUP,
                        0.65,
                        later[-1].index,
                        _cite(
                            later[-1],
                            f"the lookup at step {v.index} found ICD-9 and ICD-10 "
                            f"codes but the query hardcodes only {only} codes.",
                        ),
                    )
                )
                break
    return signals


# ---------------------------------------------------------------- SQL logic


_RE_EQ_LITERAL = re.compile(r"=\s*'([^'\n]{2,60})'")
_RE_IN_LIST = re.compile(r"\bin\s*\(([^()]{2,2000})\)", re.I)


def _ungrounded_literal(
    sql_views: list[ActionView], views: list[ActionView]
) -> tuple[str, ActionView] | None:
    """A string literal compared by equality in the final query that no earlier observation
    shows as a database value; returns it with the first query that used it."""
    final = sql_views[-1].sql or ""
    literals = _RE_EQ_LITERAL.findall(final)
    for group in _RE_IN_LIST.findall(final):
        if not group.lstrip().lower().startswith(("select", "with")):
            literals.extend(_RE_QUOTED.findall(group))
    for lit in literals:
        if "%" in lit:  # LIKE-style patterns, not values
            continue
        if re.fullmatch(r"[\d\s:./-]+", lit):  # dates and numbers are not terms to ground
            continue
        low = lit.lower()
        seen = any(low in v.observation.lower() for v in views if v.index < sql_views[-1].index)
        if seen:
            continue
        first = next((v for v in sql_views if lit in (v.sql or "")), sql_views[-1])
        return lit, first
    return None


def detect_sql_logic(
    views: list[ActionView], trajectory: Trajectory, ans: Answers | None = None
) -> list[Signal]:
    signals: list[Signal] = []
    question = trajectory.task.question or ""
    sql_views = [v for v in views if v.sql]
    ok_sql = [v for v in sql_views if not v.error]
    last_sql = sql_views[-1] if sql_views else None
    ans = ans or answers(trajectory)
    gold, pred = ans.gold, ans.pred
    answer_step = last_sql.index if last_sql else _answer_step(trajectory)

    if not _is_null_table(gold) and not _is_null_table(pred) and gold and pred:
        gold_set, pred_set = set(gold), set(pred)
        where = _cite_step(trajectory, answer_step, "") if answer_step is not None else ""
        if gold_set == pred_set and len(gold) != len(pred):
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.7,
                    answer_step,
                    where + f"the right rows with the wrong multiplicity ({len(pred)} rows for "
                    f"{len(gold)} expected): missing DISTINCT or wrong deduplication unit.",
                )
            )
        elif gold_set < pred_set:
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.5,
                    answer_step,
                    where + f"all expected rows plus {len(pred_set - gold_set)} extra: a filter "
                    "is missing or too loose.",
                )
            )
        elif pred_set < gold_set:
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.4,
                    answer_step,
                    where + f"only {len(pred_set)} of {len(gold_set)} expected rows: a filter "
                    "or join is too strict.",
                )
            )
        elif len(pred) > len(gold) and len(gold) <= 500:
            # Expected rows found inside wider rows, plus more rows: a filter is missing.
            matched, _ = _match_rows(gold, pred, "sub")
            if matched == len(gold):
                signals.append(
                    Signal(
                        SQL_LOGIC,
                        0.45,
                        answer_step,
                        where + f"the expected rows are among {len(pred)} returned rows: a "
                        "filter is missing or too loose.",
                    )
                )
    elif not _is_null_table(gold) and _is_null_table(pred) and last_sql is not None:
        # Nothing returned where the record holds an answer. A string literal compared by
        # equality is the usual culprit (a drug or route spelled differently in the database):
        # that is grounding a clinical term, not query logic.
        literal = _ungrounded_literal(sql_views, views)
        if literal is not None:
            lit, first = literal
            signals.append(
                Signal(
                    CODE_LOOKUP,
                    0.45,
                    first.index,
                    _cite(
                        first,
                        f"filters on the literal '{snippet(lit, 40)}', a value no earlier "
                        "output shows, and the final answer is empty although the record "
                        "holds one.",
                    ),
                )
            )
        else:
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.35,
                    last_sql.index,
                    _cite(
                        last_sql,
                        "the final query returns nothing although the record holds "
                        "an answer: a filter or join is too strict.",
                    ),
                )
            )

    count_sqls = [v for v in ok_sql if "count" in (v.sql or "").lower()]
    if count_sqls and _RE_UNIT_WORDS.search(question):
        last_count = count_sqls[-1]
        if _RE_JOIN.search(last_count.sql or "") and _RE_COUNT_NONDISTINCT.search(
            last_count.sql or ""
        ):
            first = next(
                v
                for v in count_sqls
                if _RE_JOIN.search(v.sql or "") and _RE_COUNT_NONDISTINCT.search(v.sql or "")
            )
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.6,
                    first.index,
                    _cite(
                        first,
                        "COUNT without DISTINCT over a JOIN while the question counts "
                        "patients or admissions.",
                    ),
                )
            )

    ref = trajectory.task.reference_sql
    if isinstance(ref, str) and last_sql and not last_sql.error:
        final = last_sql.sql or ""
        if (
            _RE_DISTINCT.search(ref)
            and not _RE_DISTINCT.search(final)
            and "count" in (final.lower())
        ):
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.5,
                    last_sql.index,
                    _cite(
                        last_sql,
                        "the final query aggregates without the DISTINCT the reference needs.",
                    ),
                )
            )

    if last_sql and last_sql.error and not has_final_answer(trajectory.final_answer):
        signals.append(
            Signal(
                SQL_LOGIC,
                0.55,
                last_sql.index,
                _cite(last_sql, "the final query fails: " + snippet(last_sql.observation, 70)),
            )
        )

    if (
        ok_sql
        and _RE_TEMPORAL_WORDS.search(question)
        and not any(_RE_TEMPORAL_SQL.search(v.sql or "") for v in ok_sql)
    ):
        target = ok_sql[-1]
        signals.append(
            Signal(
                SQL_LOGIC,
                0.4,
                target.index,
                _cite(
                    target,
                    "the question has a temporal condition but no query orders or compares times.",
                ),
            )
        )
    return signals


# ---------------------------------------------------------------- semantics and fallback


def detect_semantic(views: list[ActionView], trajectory: Trajectory) -> list[Signal]:
    ref = trajectory.task.reference_sql
    sql_views = [v for v in views if v.sql and not v.error]
    if not isinstance(ref, str) or not sql_views:
        return []
    final = sql_views[-1]
    ref_tables = sql_tables(ref) - set(DICTIONARY_TABLES)
    got_tables = final.tables - set(DICTIONARY_TABLES)
    missing, extra = ref_tables - got_tables, got_tables - ref_tables
    if not (missing and extra):
        return []
    first = next((v for v in sql_views if v.tables & extra), final)
    return [
        Signal(
            SEMANTIC,
            0.5,
            first.index,
            _cite(
                first,
                f"queries {', '.join(sorted(extra))} where the task needs "
                f"{', '.join(sorted(missing))}: a different clinical entity.",
            ),
        )
    ]


def fallback_step(views: list[ActionView], trajectory: Trajectory) -> int | None:
    """Where a misreading would first show: the first substantive query, else any step."""
    for v in views:
        if (v.sql or v.python) and not _lookup_dict(v):
            return v.index
    if views:
        return views[0].index
    return 0 if trajectory.steps else None


# ---------------------------------------------------------------- Clean/Noise pairs


def detect_noise_handling(
    views: list[ActionView], trajectory: Trajectory, ans: Answers | None = None
) -> list[Signal]:
    ans = ans or answers(trajectory)
    gold = ans.gold
    answered = has_final_answer(trajectory.final_answer) and not _is_null_table(ans.pred)
    step = _answer_step(trajectory)
    if not _is_null_table(gold) and not answered:
        return [
            Signal(
                FALSE_NULL,
                0.75,
                step,
                _cite_step(
                    trajectory, step, "answers NULL or nothing although the record holds an answer."
                ),
            )
        ]
    gold_is_null = trajectory.task.ground_truth is not None and _is_null_table(gold)
    if (gold_is_null or (trajectory.task.variant == "noise" and gold is None)) and answered:
        saw_empty = next((v for v in views if v.empty), None)
        if saw_empty is not None:
            return [
                Signal(
                    NULL_NOT_RETURNED,
                    0.7,
                    saw_empty.index,
                    _cite(
                        saw_empty,
                        "an empty result showed the evidence is missing, yet the "
                        "final answer is a concrete value instead of NULL.",
                    ),
                )
            ]
        return [
            Signal(
                NOISE_NOT_DETECTED,
                0.6,
                step,
                _cite_step(
                    trajectory,
                    step,
                    "the expected answer is NULL but a concrete value "
                    "was returned without checking the premise.",
                ),
            )
        ]
    return []
