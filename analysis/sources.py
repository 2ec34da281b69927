"""Domain glue between the data sources and the pure analysis tables.

The analysis functions take DataFrames; this module produces those frames from a
``Workspace`` (trajectory table, optionally restricted to runs) and a labeling ``Store``
(final labels, LLM-vs-human pairs), and runs the table registry over them. The CLI and the
Statistics page both go through here so they compute exactly the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go

from analysis.failures import PROVENANCE_COLUMNS
from analysis.success import NO_SCOPE, OTHER_INTENT
from analysis.tables import (
    DEFAULT_LABEL_POLICY,
    DESCRIPTIONS,
    LABEL_POLICIES,
    LABEL_TABLES,
    PAIR_TABLES,
    STATISTICS,
    TABLES,
    TITLES,
    TableOptions,
    all_tables,
    compute,
    label_policy_line,
)
from analysis.tables import counted_labels as _policy_labels
from faillab_core.errors import FaillabError
from labeling.store.policy import OPERATOR, Viewer
from labeling.store.records import HUMAN_PROVENANCES
from trajectories import columns as col
from trajectories.outcome import DEFAULT_SUCCESS_SOURCE, apply_people, people_counted

if TYPE_CHECKING:
    from labeling.store import Store
    from trajectories.workspace import Workspace

#: Columns the statistics read. The long text columns (question, SQL, answers, payload) are
#: left out: they are the bulk of the bytes and no table uses them, so a 100k-row load stays
#: fast.
STATS_COLUMNS: tuple[str, ...] = (
    col.ID,
    col.RUN,
    col.MODEL,
    col.TEMPERATURE,
    col.ROLLOUT,
    col.TASK_ID,
    col.INTENT,
    col.SCOPE,
    col.TEMPLATE_ID,
    col.SPLIT,
    col.PAIR_ID,
    col.NOISE_TYPE,
    col.VARIANT,
    col.ANSWER_FORMAT,
    col.N_STEPS,
    col.N_TURNS,
    col.N_ERRORS,
    col.RECORDED_SUCCESS,
    col.RECORDED_REWARD,
    col.EXACT_MATCH,
    col.SUCCESS,
)

#: Final-label provenances that carry a human verdict (what the pre-labeller is judged by).
PAIR_COLUMNS = ["trajectory_id", "llm_category", "human_category", "human_provenance",
                "prelabel_shown"]

__all__ = [
    "DEFAULT_LABEL_POLICY", "DESCRIPTIONS", "LABEL_POLICIES", "LABEL_TABLES", "PAIR_TABLES",
    "STATISTICS", "TABLES", "TITLES", "Inputs", "SourceError", "TableOptions", "chart_for",
    "compute_all", "compute_table", "counted_labels", "label_policy_line", "load_frame",
    "load_inputs",
]


class SourceError(FaillabError):
    """A problem with the inputs that the user can fix (unknown run or table)."""


# --- trajectories ------------------------------------------------------------------------------


def _sql_list(n: int) -> str:
    return ", ".join("?" for _ in range(n))


def load_frame(
    ws: Workspace, runs: Iterable[str] | None = None,
    success_source: str = DEFAULT_SUCCESS_SOURCE,
) -> pd.DataFrame:
    """The trajectory table with the columns statistics use, optionally only ``runs``.

    ``success`` follows ``success_source`` (``recorded`` | ``exact_match``, docs/scoring.md);
    it is NULL for unscored trajectories, which every statistic leaves out.
    Filtering happens in DuckDB so a few runs out of a large workspace never materialise the
    rest in pandas.
    """
    from trajectories.workspace import success_expression

    try:
        success = success_expression(success_source)
    except ValueError as err:
        raise SourceError(str(err)) from None
    columns = [c if c != col.SUCCESS else f"{success} AS {col.SUCCESS}" for c in STATS_COLUMNS]
    sql = "SELECT " + ", ".join(columns) + f" FROM {col.TRAJECTORIES}"
    params: list[Any] = []
    if runs is not None:
        wanted = list(dict.fromkeys(runs))
        if not wanted:
            return pd.DataFrame(columns=list(STATS_COLUMNS))
        sql += f" WHERE {col.RUN} IN ({_sql_list(len(wanted))})"
        params = wanted
    # A stable row order makes every derived table (and therefore exports) reproducible.
    sql += f" ORDER BY {col.listed(col.LIST_ORDER)}"
    frame: pd.DataFrame = ws.query_df(sql, params)
    return frame


def apply_verdicts(frame: pd.DataFrame, verdicts: Mapping[str, bool | None] | None,
                   success_source: str = DEFAULT_SUCCESS_SOURCE) -> pd.DataFrame:
    """``frame`` with people's verdicts winning over its ``success`` by the one outcome rule
    (``trajectories.outcome``; source ``verdict`` only). A trajectory whose people disagree
    is undecided: NULL, left out like unscored ones until a lead decides."""
    return apply_people(frame, people_counted(success_source, verdicts or {}))


def human_verdicts(store: Store | None, viewer: Viewer = OPERATOR) -> dict[str, bool | None]:
    """People's verdicts ``viewer`` may see (``store.verdicts.effective``); none without a
    store."""
    return {} if store is None else store.verdicts.effective(viewer)


def run_names(ws: Workspace) -> list[str]:
    rows = ws.connect().execute(f"SELECT DISTINCT {col.RUN} FROM {col.TRAJECTORIES} "
                                f"ORDER BY {col.RUN}").fetchall()
    return [str(r[0]) for r in rows]


def check_runs(ws: Workspace, runs: Sequence[str]) -> None:
    """Raise ``SourceError`` naming any run that is not in the workspace."""
    known = set(run_names(ws))
    missing = [r for r in runs if r not in known]
    if missing:
        available = ", ".join(sorted(known)) or "none"
        raise SourceError(f"unknown run(s): {', '.join(missing)} (available: {available})")


def run_temperatures(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run: model and sampling temperature (Pass^k depends on it)."""
    if df.empty:
        return pd.DataFrame(columns=["run", "model", "temperature"])
    temps = pd.to_numeric(df["temperature"], errors="coerce")
    out = (
        df.assign(temperature=temps)
        .groupby("run", sort=False)
        .agg(model=("model", "first"), temperature=("temperature", "first"))
        .reset_index()
    )
    return out


def filter_frame(
    df: pd.DataFrame,
    intents: Iterable[str] | None = None,
    scopes: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Rows whose intent / scope are among the given ones (None keeps everything).

    Values are matched the way the tables label them: a NULL intent is "Other" and a NULL
    scope "unscoped", so the filter options and the table rows always agree.
    """
    mask = pd.Series(True, index=df.index)
    if intents is not None:
        intent = df["intent"].astype("object").fillna(OTHER_INTENT).astype(str)
        mask &= intent.isin(list(intents))
    if scopes is not None:
        scope = df["scope"].astype("object").fillna(NO_SCOPE).astype(str)
        mask &= scope.isin(list(scopes))
    return df[mask]


# --- labels ------------------------------------------------------------------------------------


def final_labels(store: Store, taxonomy_version: str | None = None, *,
                 viewer: Viewer = OPERATOR) -> pd.DataFrame:
    """The store's final labels (one row per labelled trajectory, with provenance), as
    `viewer` may see them (the store decides; the command line is the operator)."""
    return store.adjudications.final_labels(taxonomy_version, viewer=viewer)


def _llm_categories(store: Store, taxonomy_version: str | None) -> dict[str, str]:
    """trajectory id -> the LLM's latest category on it (one read for all items)."""
    opinions = store.prelabels.opinions(taxonomy_version)
    return {str(tid): str(o.category) for tid, o in opinions.items()}


def _prelabel_seen(store: Store, taxonomy_version: str | None,
                   viewer: Viewer) -> dict[str, bool]:
    """trajectory id -> whether any latest human label on it was made with the pre-label shown."""
    df = store.labels.frame(taxonomy_version=taxonomy_version, viewer=viewer)
    humans = df[df["source"] == "human"].drop_duplicates(["annotator", "trajectory_id"],
                                                         keep="last")
    seen = humans.groupby(humans["trajectory_id"].astype(str))["prelabel_shown"].any()
    return {str(k): bool(v) for k, v in seen.items()}


def labeller_pairs(store: Store, taxonomy_version: str | None = None, *,
                   viewer: Viewer = OPERATOR) -> pd.DataFrame:
    """LLM pre-label category vs the human verdict, one row per trajectory having both.

    The human side is the final label when it is human-derived (adjudicated, agreed or single
    annotator); disputed items have no verdict yet and LLM-only items nothing to compare with.
    Items the pre-labeller never labelled are left out rather than counted as overrides, since
    pre-labelling often covers only part of a workspace. ``prelabel_shown`` says whether any
    person behind the verdict had the pre-label on screen (possibly anchored by it).
    """
    final = final_labels(store, taxonomy_version, viewer=viewer)
    human = final[final["provenance"].isin(HUMAN_PROVENANCES) & final["category"].notna()]
    if human.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    llm = _llm_categories(store, taxonomy_version)
    ids = human["trajectory_id"].astype(str)
    pairs = pd.DataFrame(
        {
            "trajectory_id": ids.to_numpy(),
            "llm_category": ids.map(llm).to_numpy(),
            "human_category": human["category"].astype(str).to_numpy(),
            "human_provenance": human["provenance"].astype(str).to_numpy(),
            "prelabel_shown": ids.map(_prelabel_seen(store, taxonomy_version, viewer))
            .fillna(False).astype(bool).to_numpy(),
        }
    )
    return pairs[pairs["llm_category"].notna()].reset_index(drop=True)


# --- tables ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """Everything the tables need: trajectories, final labels and labeller pairs."""

    frame: pd.DataFrame
    labels: pd.DataFrame | None = None
    pairs: pd.DataFrame | None = None


def table_names() -> list[str]:
    return list(STATISTICS)


def needs_labels(names: Iterable[str]) -> bool:
    return any(n in LABEL_TABLES or n in PAIR_TABLES for n in names)


def load_inputs(
    ws: Workspace,
    store: Store | None = None,
    runs: Iterable[str] | None = None,
    taxonomy_version: str | None = None,
    success_source: str = DEFAULT_SUCCESS_SOURCE,
    viewer: Viewer = OPERATOR,
) -> Inputs:
    """Everything the tables need; people's verdicts (as ``viewer`` may see them) win over the
    recorded and judged outcomes under the default success source."""
    frame = load_frame(ws, runs, success_source)
    if store is None:
        return Inputs(frame)
    frame = apply_verdicts(frame, human_verdicts(store, viewer), success_source)
    return Inputs(
        frame,
        final_labels(store, taxonomy_version),
        labeller_pairs(store, taxonomy_version),
    )


def counted_labels(labels: pd.DataFrame | None, policy: str = DEFAULT_LABEL_POLICY
                   ) -> pd.DataFrame | None:
    """The final labels the label tables count under ``policy`` (the registry's rule)."""
    try:
        return _policy_labels(labels, policy)
    except ValueError as err:
        raise SourceError(str(err)) from None


def compute_table(name: str, inputs: Inputs, runs: Iterable[str] | None = None,
                  options: TableOptions | None = None) -> pd.DataFrame:
    """One registered table over every final label in ``inputs`` under ``options`` (the label
    policy is applied by the registry); ``runs`` also orders the rows (as given)."""
    if name not in STATISTICS:
        raise SourceError(f"unknown table {name!r} (choose from {', '.join(STATISTICS)})")
    options = _with_runs(options, runs)
    return compute(name, inputs.frame, inputs.labels, inputs.pairs, options)


def compute_all(
    inputs: Inputs, runs: Iterable[str] | None = None, timings: dict[str, float] | None = None,
    options: TableOptions | None = None,
) -> dict[str, pd.DataFrame]:
    return all_tables(inputs.frame, inputs.labels, None, pairs=inputs.pairs, timings=timings,
                      options=_with_runs(options, runs))


def _with_runs(options: TableOptions | None, runs: Iterable[str] | None) -> TableOptions:
    options = options or TableOptions()
    return options if runs is None else dataclasses.replace(options, runs=tuple(runs))


# --- charts ------------------------------------------------------------------------------------


def chart_for(name: str, table: pd.DataFrame) -> go.Figure:
    """The plotly figure for a computed table (same figure in the app and the CLI)."""
    statistic = STATISTICS.get(name)
    if statistic is None or statistic.chart is None:
        raise SourceError(f"no chart for table {name!r}")
    if name == "provenance":
        table = table.reindex(columns=PROVENANCE_COLUMNS)
    fig = statistic.chart(table)
    if name == "passk" and "temperature" in table.columns:
        # Pass^k is only comparable between runs sampled at the same temperature, so the
        # legend says which temperature each line was sampled at.
        temps = table.groupby("run", sort=False)["temperature"].first()
        for trace in fig.data:
            run = str(trace.name)
            if trace.name is not None and run in temps.index:
                trace.name = f"{run} (T={_temperature_text(temps[run])})"
    return fig


def _temperature_text(value: Any) -> str:
    return "?" if pd.isna(value) else f"{float(value):g}"
