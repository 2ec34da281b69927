"""The workspace's column and view names, written once: the stored row's schema
(``trajectories.rows.INDEX_SCHEMA``), the views every reader queries (``trajectories.queries``)
and the SQL of the readers in the layers above (the outcome rule, the pool of work, statistics)
are built from these names, so a column is renamed here or nowhere.

docs/CONTRACTS.md ("Workspace trajectory table") says what each column means.
"""

from __future__ import annotations

# -- views and tables a workspace connection has ---------------------------------------------------

#: Every trajectory with its task fields resolved across runs and its outcome (no payload).
TRAJECTORIES = "trajectories"
#: The outcome columns only (no task consensus): what counts and outcome lists read.
OUTCOMES = "outcomes"
#: The stored rows as written (payload included).
PARTS = "parts"

# -- the stored row (one Parquet row per trajectory) -----------------------------------------------

ID = "id"
RUN = "run"
MODEL = "model"
TEMPERATURE = "temperature"
ROLLOUT = "rollout"
TASK_ID = "task_id"
QUESTION = "question"
INTENT = "intent"
SCOPE = "scope"
TEMPLATE_ID = "template_id"
SPLIT = "split"
PAIR_ID = "pair_id"
NOISE_TYPE = "noise_type"
VARIANT = "variant"
REFERENCE_SQL = "reference_sql"
ANSWER_FORMAT = "answer_format"
GROUND_TRUTH = "ground_truth"
FINAL_ANSWER = "final_answer"
N_STEPS = "n_steps"
N_TURNS = "n_turns"
N_ERRORS = "n_errors"
RECORDED_SUCCESS = "recorded_success"
RECORDED_REWARD = "recorded_reward"
RECORDED_SOURCE = "recorded_source"
EXACT_MATCH = "exact_match"
SCORER_VERSION = "scorer_version"
JUDGE_VERDICT = "judge_verdict"
JUDGE_METHOD = "judge_method"
JUDGE_EVIDENCE = "judge_evidence"
JUDGE_VERSION = "judge_version"
SOURCE_FILE = "source_file"
SOURCE_SHA = "source_sha"
SOURCE_RECORD = "source_record"
IMPORT_KEY = "import_key"
PAYLOAD = "payload"

# -- computed by the views and the outcome rule ----------------------------------------------------

#: The judge's verdict as an outcome (undecided: NULL).
JUDGED_SUCCESS = "judged_success"
#: The outcome: the recorded verdict, else the judge's; people's verdicts resolved on top by
#: ``trajectories.outcome.resolved_relation``.
SUCCESS = "success"
#: Added by ``resolved_relation``: a person's verdict decided the row.
PERSON_DECIDED = "person_decided"

# -- groups ----------------------------------------------------------------------------------------

#: A task's fields, resolved per task id across runs (and overridable from a task file).
TASK_FIELDS = (INTENT, SCOPE, TEMPLATE_ID)
#: The judge's columns.
JUDGE_COLUMNS = (JUDGE_VERDICT, JUDGE_METHOD, JUDGE_EVIDENCE, JUDGE_VERSION)
#: The provenance columns (NULL in rows imported before they existed).
PROVENANCE_COLUMNS = (SOURCE_SHA, SOURCE_RECORD, IMPORT_KEY)
#: The order trajectories are listed in (ties broken by id, so pages never overlap).
LIST_ORDER = (RUN, TASK_ID, ROLLOUT, ID)


def listed(names: tuple[str, ...] | list[str], prefix: str = "") -> str:
    """``names`` as a SQL select list (``a, b``; ``p.a, p.b`` with ``prefix="p"``)."""
    return ", ".join(f"{prefix}.{n}" if prefix else n for n in names)
