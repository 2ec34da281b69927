"""The built-in taxonomies' names and category keys, as names code imports instead of spelling.

The taxonomy files in ``taxonomy/data`` are the one home of these keys; this module only gives
them names a type checker and a reader can follow. Importing it compares every constant with the
file it comes from and raises ``TaxonomyError`` when they disagree (a key renamed, added, dropped
or reordered in the file), so code can never go on writing a key the file no longer has.
"""

from __future__ import annotations

from taxonomy.model import DEFAULT_TAXONOMY, TaxonomyError, builtin_taxonomies

# The taxonomies' names (the ``name`` field of their files).
EHR_COMPLEX = DEFAULT_TAXONOMY
ROBUSTGYM = "robustgym"

# EHR-Complex (taxonomy/data/ehr_complex_v1.json), in the file's order.
SEMANTIC_MISUNDERSTANDING = "semantic_misunderstanding"
MEDICAL_CODE_LOOKUP_ERROR = "medical_code_lookup_error"
SQL_LOGIC_ERROR = "sql_logic_error"
VARIABLE_SCOPE_ERROR = "variable_scope_error"
ANSWER_FORMAT_ERROR = "answer_format_error"
STUCK_IN_LOOP = "stuck_in_loop"
EHR_COMPLEX_KEYS = (
    SEMANTIC_MISUNDERSTANDING,
    MEDICAL_CODE_LOOKUP_ERROR,
    SQL_LOGIC_ERROR,
    VARIABLE_SCOPE_ERROR,
    ANSWER_FORMAT_ERROR,
    STUCK_IN_LOOP,
)

# RobustGym's Clean/Noise taxonomy (taxonomy/data/robustgym_v1.json), in the file's order; its
# Answer Format Error shares the EHR-Complex key.
NOISE_NOT_DETECTED = "noise_not_detected"
NULL_NOT_RETURNED = "null_not_returned"
CONDITION_RELAXED = "condition_relaxed"
FALSE_NULL = "false_null"
RETRIEVAL_ERROR = "retrieval_error"
ROBUSTGYM_KEYS = (
    NOISE_NOT_DETECTED,
    NULL_NOT_RETURNED,
    CONDITION_RELAXED,
    FALSE_NULL,
    RETRIEVAL_ERROR,
    ANSWER_FORMAT_ERROR,
)

# Each built-in taxonomy's keys as this module names them.
BUILTIN_KEYS: dict[str, tuple[str, ...]] = {
    EHR_COMPLEX: EHR_COMPLEX_KEYS,
    ROBUSTGYM: ROBUSTGYM_KEYS,
}


def disagreements() -> list[str]:
    """Where these constants and the built-in taxonomy files disagree, one line each (empty when
    they agree)."""
    files = builtin_taxonomies()
    out: list[str] = []
    for name, keys in BUILTIN_KEYS.items():
        taxonomy = files.get(name)
        if taxonomy is None:
            out.append(f"taxonomy {name!r}: no built-in file has this name")
        elif taxonomy.keys != keys:
            out.append(f"taxonomy {name!r}: the file's keys are {list(taxonomy.keys)}, "
                       f"taxonomy.keys names {list(keys)}")
    return out


_problems = disagreements()
if _problems:
    raise TaxonomyError("taxonomy.keys disagrees with taxonomy/data: " + "; ".join(_problems))
