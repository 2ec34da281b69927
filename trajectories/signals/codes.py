"""Medical-code lookup: dotted or wrong-version ICD codes, and dictionary lookups whose
identifiers the final queries do not use."""

from __future__ import annotations

import re

from trajectories.signals._common import (
    _MAX_LOOKUPS,
    _RE_QUOTED,
    CODE_LOOKUP,
    DICTIONARY_TABLES,
    ActionView,
    Signal,
    _cite,
    _lookup_dict,
    code_literals,
)
from trajectories.signals._reference import compare_with_reference

_ICD_DICTS = frozenset({"d_icd_diagnoses", "d_icd_procedures"})
_RE_NUMBER_LIT = re.compile(r"\b\d+(?:\.\d+)?\b")
_RE_ICD_TOKEN = re.compile(r"\b([A-Z]\d{2}[A-Z0-9]{0,5}|\d{3,5}|[VE]\d{2,4})\b")
_RE_ITEMID_TOKEN = re.compile(r"\b(\d{5,6})\b")
_RE_DOTTED_ICD = re.compile(
    r"'\s*(\d{3}\.\d{1,2}|[VE]\d{2,3}\.\d{1,2}|[A-Z]\d{2}\.[A-Z0-9]{1,4})\s*'"
)
_RE_ICD_VERSION = re.compile(r"\bicd_version\s*(?:=|==)\s*'?(9|10)\b", re.I)
_RE_SUBQUERY_IDS = re.compile(r"\b(?:itemid|icd_code)\s+in\s*\(\s*select\b", re.I)
_RE_ICD_VERSION_IN = re.compile(r"\bicd_version\s+in\s*\(([^()]*)\)", re.I)
_RE_QUESTION_VERSION = re.compile(
    r"icd[\s\-_]?(?:9|10)\b|\bicd(?:9|10)|\bversion\s*(?:9|10)\b|\b(?:ninth|tenth)\s+revision",
    re.I,
)


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


def _versions(sql: str) -> frozenset[str]:
    """ICD versions a query selects by an icd_version filter (empty: no version filter)."""
    found = set(_RE_ICD_VERSION.findall(sql))
    for group in _RE_ICD_VERSION_IN.findall(sql):
        found.update(re.findall(r"\b(?:9|10)\b", group))
    return frozenset(found)


def _version_restriction(
    sql_views: list[ActionView], reference: str | None
) -> tuple[ActionView, str] | None:
    """The query where an ICD-version restriction that reaches the answer starts.

    Only the last query with an icd_version filter counts (earlier ones were revised); it must
    select one version (``(icd_version = 9 AND ...) OR (icd_version = 10 AND ...)`` covers
    both), no later query may filter on codes of both families, and the reference SQL, when
    known, must not restrict to that same version.
    """
    ok = [v for v in sql_views if not v.error]
    tagged = [(v, _versions(v.sql or "")) for v in ok]
    tagged = [(v, ver) for v, ver in tagged if ver]
    if not tagged:
        return None
    last, versions = tagged[-1]
    if len(versions) != 1:
        return None
    if isinstance(reference, str) and _versions(reference) == versions:
        return None
    for w in ok:
        if w.index > last.index:
            fams = {f for c in code_literals(w.sql) if (f := _icd_family(c))}
            if len(fams) == 2:
                return None
    first = last
    for v, ver in reversed(tagged):
        if ver != versions:
            break
        first = v
    return first, next(iter(versions))


def _icd_family(code: str) -> str | None:
    if code[:1].isdigit():
        return "ICD-9"
    if code[:1] in "VE":  # both versions have V and E chapters: undecidable
        return None
    if code[:1].isalpha() and code[1:2].isdigit():
        return "ICD-10"
    return None


def _against_reference(views: list[ActionView], reference: str | None) -> list[Signal] | None:
    """Identifiers of the final query against the reference SQL's: ``[]`` when they are the
    same (the codes were grounded right, so no code rule should fire), signals when they
    differ over the same tables, ``None`` when the reference says nothing either way."""
    cmp = compare_with_reference(views, reference)
    if cmp is None or not cmp.final_codes:
        return None
    got, want = cmp.final_codes, cmp.reference_codes
    if got == want:
        return []
    if not cmp.same_tables or not want:
        return None
    missing, extra = sorted(want - got), sorted(got - want)
    if extra and _RE_SUBQUERY_IDS.search(cmp.reference):
        return None  # the reference resolves some identifiers by name: which ones is unknown
    got_fams = {f for c in got if (f := _icd_family(c))}
    missing_fams = {f for c in missing if (f := _icd_family(c))}
    if not extra and len(got_fams) == 1 and missing_fams and not missing_fams & got_fams:
        conf = 0.65
        detail = (
            f"uses only {next(iter(got_fams))} codes; the reference also needs "
            f"{', '.join(missing[:5])} ({', '.join(sorted(missing_fams))})."
        )
    elif not extra:
        conf = 0.55
        detail = (
            f"uses {len(got)} of the reference's identifiers, without "
            f"{', '.join(missing[:5])}."
        )
    else:
        conf = 0.6
        detail = (
            f"filters on {', '.join(extra[:5])} where the reference uses "
            f"{', '.join(missing[:5]) or 'other identifiers'}: another dictionary entry."
        )
    return [Signal(CODE_LOOKUP, conf, cmp.final.index, _cite(cmp.final, detail))]


def detect_code_lookup(
    views: list[ActionView], question: str, reference: str | None = None
) -> list[Signal]:
    by_reference = _against_reference(views, reference)
    if by_reference is not None:
        return by_reference
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
        restricted = _version_restriction(sql_views, reference)
        if restricted is not None:
            v, version = restricted
            signals.append(
                Signal(
                    CODE_LOOKUP,
                    0.55,
                    v.index,
                    _cite(
                        v,
                        f"restricts to ICD-{version} although the question names no ICD "
                        "version.",
                    ),
                )
            )

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
            ref_families = {
                f for c in code_literals(reference) if (f := _icd_family(c))
            }
            if (
                len(families) == 2
                and len(used_families) == 1
                and dict_table not in later[-1].tables
                and ref_families != used_families  # the reference keeps to one family too
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
