"""Variable scope: NameErrors and missing tables for names an earlier execution defined."""

from __future__ import annotations

import re

from trajectories.signals._common import VARIABLE_SCOPE, ActionView, Signal, _cite

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
