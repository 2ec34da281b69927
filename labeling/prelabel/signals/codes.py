"""Medical-code lookup: dotted or wrong-version ICD codes, and dictionary lookups whose
identifiers the final queries do not use."""

from __future__ import annotations

import re

from labeling.prelabel.signals._common import (
    _MAX_LOOKUPS,
    _RE_QUOTED,
    CODE_LOOKUP,
    DICTIONARY_TABLES,
    ActionView,
    Signal,
    _cite,
    _lookup_dict,
)

_ICD_DICTS = frozenset({"d_icd_diagnoses", "d_icd_procedures"})
_RE_NUMBER_LIT = re.compile(r"\b\d+(?:\.\d+)?\b")
_RE_ICD_TOKEN = re.compile(r"\b([A-Z]\d{2}[A-Z0-9]{0,5}|\d{3,5}|[VE]\d{2,4})\b")
_RE_ITEMID_TOKEN = re.compile(r"\b(\d{5,6})\b")
_RE_DOTTED_ICD = re.compile(
    r"'\s*(\d{3}\.\d{1,2}|[VE]\d{2,3}\.\d{1,2}|[A-Z]\d{2}\.[A-Z0-9]{1,4})\s*'"
)
_RE_ICD_VERSION = re.compile(r"\bicd_version\s*(?:=|==)\s*'?(9|10)\b", re.I)
_RE_QUESTION_VERSION = re.compile(r"icd[\s\-_]?(?:9|10)\b|\bicd(?:9|10)", re.I)


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
